"""The session tier's writes: the directory made when missing, names normalised once."""

from __future__ import annotations

import shutil
import tempfile
from datetime import UTC
from pathlib import Path
from typing import Any

import orjson
import pytest
from fakes.instant_clock import InstantClock
from hypothesis import given, settings
from hypothesis import strategies as st
from property_budget import examples

from core.clock import VirtualClock
from memory.session_store import SessionStore, normalise_name, session_key

T0 = 1_740_787_200_000


@pytest.mark.parametrize("durable", [True, False])
def test_a_set_makes_the_directory_again_when_it_was_removed(tmp_path: Path, durable: bool) -> None:
    directory = tmp_path / "state" / "sessions"
    store = SessionStore(directory, VirtualClock(epoch_ms=T0), durable=durable)
    key = session_key("BTC/USDT", "decision")
    store.set(key, {"action": "BUY"})
    shutil.rmtree(tmp_path / "state")
    store.set(key, {"action": "SELL"})
    (written,) = directory.glob("*.json")
    assert orjson.loads(written.read_bytes())["value"] == {"action": "SELL"}
    restarted = SessionStore(directory, VirtualClock(epoch_ms=T0))
    assert restarted.get(key) == {"action": "SELL"}


def test_a_hand_edit_between_two_sets_is_replaced_by_the_second(tmp_path: Path) -> None:
    store = SessionStore(tmp_path, VirtualClock(epoch_ms=T0), durable=False)
    key = session_key("ETH/USDT", "analysis", "thesis")
    store.set(key, "a long first thesis, longer than the second")
    (path,) = tmp_path.glob("*.json")
    path.write_bytes(b'{"edited": true, "padding": "' + b"x" * 200 + b'"}')
    entry = store.set(key, "second")
    assert orjson.loads(path.read_bytes()) == entry.model_dump(mode="json")


def _normalised_again(name: str) -> str:
    return normalise_name.__wrapped__(name)


@given(st.lists(st.one_of(st.text(max_size=8), st.sampled_from(["BTCUSDT", "btc/usdt"]))))
def test_remembered_names_are_those_normalised_again(names: list[str]) -> None:
    for name in names * 2:
        try:
            expected = _normalised_again(name)
        except ValueError:
            with pytest.raises(ValueError):
                normalise_name(name)
            continue
        assert normalise_name(name) == expected


_keys = st.sampled_from(
    [session_key("BTC/USDT", "decision"), session_key("ETH/USDT", "analysis", "thesis")]
)
_session_ops = st.lists(
    st.one_of(
        st.tuples(st.just("set"), _keys, st.integers(0, 3), st.sampled_from([None, 1.0, 60.0])),
        st.tuples(st.just("delete"), _keys),
        st.tuples(st.just("get"), _keys),
        st.tuples(st.just("advance"), st.sampled_from([0.5, 30.0, 90_000.0])),
        st.tuples(st.just("flush")),
    ),
    max_size=40,
)


def _files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in directory.glob("*.json")}


@settings(max_examples=examples(150), deadline=None)
@given(ops=_session_ops, behind=st.sampled_from([1, 2, 3, 256]))
def test_sets_held_back_answer_and_write_as_sets_written_at_once(
    ops: list[tuple[Any, ...]], behind: int
) -> None:
    """Write-behind against write-through: the same answers all along, and once flushed (or
    ``behind`` sets on) the same files, byte for byte."""
    clock = InstantClock(epoch_ms=T0)
    with tempfile.TemporaryDirectory() as scratch:
        held_dir, plain_dir = Path(scratch) / "held", Path(scratch) / "plain"
        held = SessionStore(held_dir, clock, durable=False, write_behind=behind)
        plain = SessionStore(plain_dir, clock, durable=False)
        sets = 0
        for op in ops:
            if op[0] == "set":
                assert held.set(op[1], op[2], op[3]) == plain.set(op[1], op[2], op[3])
                sets += 1
            elif op[0] == "delete":
                held.delete(op[1])
                plain.delete(op[1])
            elif op[0] == "get":
                assert held.entry(op[1]) == plain.entry(op[1])
            elif op[0] == "advance":
                clock.advance(op[1])
            else:
                held.flush()
                sets = 0
            if sets % behind == 0:  # flushed by the set itself, or nothing set since
                sets = 0
                assert _files(held_dir) == _files(plain_dir)
            assert held.keys() == plain.keys()
        held.flush()
        assert _files(held_dir) == _files(plain_dir)
        restarted = SessionStore(held_dir, clock)
        assert [e.key for e in restarted.live()] == [e.key for e in plain.live()]


def test_a_held_set_is_written_by_flush_only(tmp_path: Path) -> None:
    store = SessionStore(tmp_path, VirtualClock(epoch_ms=T0), durable=False, write_behind=8)
    key = session_key("SOL/USDT", "decision")
    entry = store.set(key, {"action": "HOLD"})
    assert _files(tmp_path) == {}
    assert store.get(key) == {"action": "HOLD"}  # from L1 meanwhile
    store.flush()
    (path,) = tmp_path.glob("*.json")
    assert orjson.loads(path.read_bytes()) == entry.model_dump(mode="json")


def test_an_outside_write_is_still_seen_with_sets_held_back(tmp_path: Path) -> None:
    """The operator's CLI writes a key this store does not hold: read from its file."""
    clock = VirtualClock(epoch_ms=T0)
    store = SessionStore(tmp_path, clock, durable=False, write_behind=256)
    mine, theirs = session_key("BTC/USDT", "decision"), session_key("BTC/USDT", "review")
    store.set(mine, "mine")
    assert store.keys() == [mine]
    SessionStore(tmp_path, clock).set(theirs, "edited by hand")
    assert store.get(theirs) == "edited by hand"
    assert store.keys() == [mine, theirs]


class _Str(str):
    pass


_leaf = st.one_of(
    st.text(max_size=5),
    st.text(max_size=3).map(_Str),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, True, False, None, 2**70]),
    st.datetimes(timezones=st.just(UTC)),
    st.tuples(st.integers()),
)
_value = st.one_of(
    _leaf,
    st.dictionaries(st.one_of(st.text(max_size=4), st.integers(0, 3)), _leaf, max_size=5),
    st.dictionaries(st.text(max_size=4), st.dictionaries(st.text(max_size=2), _leaf), max_size=2),
)


def _made(make: Any) -> tuple[str, Any]:
    try:
        return "made", make()
    except Exception as exc:
        return type(exc).__name__, str(exc)


@settings(max_examples=examples(400), deadline=None)
@given(st.one_of(st.text(max_size=6), st.text(max_size=6).map(_Str)), _value, st.integers())
def test_an_entry_and_its_bytes_are_the_validated_entry_and_its_dump(
    key: str, value: Any, now: int
) -> None:
    from memory.session_store import SessionEntry, _entry_and_bytes

    def validated() -> tuple[SessionEntry, bytes]:
        entry = SessionEntry(key=key, value=value, written_at_ms=now, expires_at_ms=now + 5)
        return entry, orjson.dumps(entry.model_dump(mode="json"))

    (kind, got), (want_kind, want) = (
        _made(lambda: _entry_and_bytes(key, value, now, now + 5)),
        _made(validated),
    )
    assert kind == want_kind
    if kind != "made":
        assert got == want
        return
    assert got[1] == want[1]
    assert got[0].__dict__.keys() == want[0].__dict__.keys()
    for name, field in want[0].__dict__.items():
        assert type(got[0].__dict__[name]) is type(field)
        assert got[0].__dict__[name] is field or got[0].__dict__[name] == field


@pytest.mark.parametrize("durable", [True, False])
def test_a_reasoning_with_del_and_c1_is_written_escaped_and_read_back_as_it_was(
    tmp_path: Path, durable: bool
) -> None:
    """A model's reasoning holding U+009B (a terminal reads it as ESC [) or DEL reached the
    session files raw, which a person may ``cat``; the journals already escaped them."""
    text = "momentum\x9b31m up\x7f\x85 ok"
    store = SessionStore(tmp_path, VirtualClock(epoch_ms=T0), durable=durable)
    key = session_key("BTC/USDT", "decision")
    store.set(key, {"reasoning": text})
    store.flush()
    (written,) = tmp_path.glob("*.json")
    data = written.read_bytes()
    assert b"\xc2\x9b" not in data and b"\x7f" not in data and b"\\u009b" in data
    assert orjson.loads(data)["value"] == {"reasoning": text}
    assert SessionStore(tmp_path, VirtualClock(epoch_ms=T0)).get(key) == {"reasoning": text}
