"""``agent.memo``: bounded memos, oldest out first; the identity memo answers only for the very
object stored, never for an equal one."""

from __future__ import annotations

import math

from agent.memo import FloatMemo, IdentityMemo, remember


def test_remember_drops_the_oldest_entry_when_full() -> None:
    memo: dict[str, int] = {}
    for i, key in enumerate("abcd"):
        remember(memo, key, i, size=3)
    assert memo == {"b": 1, "c": 2, "d": 3}


def test_identity_memo_answers_for_the_same_object_only() -> None:
    memo: IdentityMemo[tuple[float, ...], str] = IdentityMemo(4)
    series = tuple(float(i) for i in range(300))
    memo.put(series, "signals")
    assert memo.get(series) == "signals"
    equal = tuple(float(i) for i in range(300))
    assert equal == series and equal is not series
    assert memo.get(equal) is None


def test_identity_memo_holds_its_keys_and_forgets_the_oldest() -> None:
    memo: IdentityMemo[tuple[int, ...], int] = IdentityMemo(2)
    keys = [(i, i + 1) for i in range(3)]
    for i, key in enumerate(keys):
        memo.put(key, i)
    assert memo.get(keys[0]) is None
    assert [memo.get(k) for k in keys[1:]] == [1, 2]


def test_a_float_memo_answers_compute_and_empties_when_full() -> None:
    calls: list[float] = []

    def halve(value: float) -> float:
        calls.append(value)
        return value / 2

    memo = FloatMemo(halve, size=2)
    assert [memo.of(v) for v in (1.0, 1.0, 3.0)] == [0.5, 0.5, 1.5]
    assert calls == [1.0, 3.0]
    memo.of(5.0)  # a third value: the full memo was emptied first
    assert memo.entries == {5.0: 2.5}


def test_a_float_memo_keeps_the_sign_of_zero() -> None:
    memo = FloatMemo(lambda value: value, size=8)
    got = [memo.of(z) for z in (0.0, -0.0, -0.0, 0.0)]
    assert [math.copysign(1.0, z) for z in got] == [1.0, -1.0, -1.0, 1.0]
    assert memo.entries == {}
