"""``agent.memo``: bounded memos, oldest out first; the identity memo answers only for the very
object stored, never for an equal one."""

from __future__ import annotations

from agent.memo import IdentityMemo, remember


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
