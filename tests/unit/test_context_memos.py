"""The context assembler's memos answer as the computations they spare: ``dated``,
``normalise_name`` and the rules' ``matches_any`` (pure, remembered by argument) and the session
store's sorted keys (made again when a key is added to or removed from either level)."""

from __future__ import annotations

import fnmatch
import tempfile
from pathlib import Path
from typing import Any

from fakes.instant_clock import InstantClock
from hypothesis import given, settings
from hypothesis import strategies as st
from property_budget import examples

from memory.context import FUTURE_SLACK_SECS, STALE_AFTER_SECS, Dated, dated
from memory.session_store import SessionStore, normalise_name
from memory.tiers import matches_any

T0 = 1_740_787_200_000


def _dated_afresh(at_ms: int | None, now_ms: int) -> Dated:
    if at_ms is None:
        return Dated(at_ms=None, age_secs=None, stale=True)
    if (at_ms - now_ms) / 1000 > FUTURE_SLACK_SECS:
        return Dated(at_ms=at_ms, age_secs=None, stale=True)
    age = max(0.0, (now_ms - at_ms) / 1000)
    return Dated(at_ms=at_ms, age_secs=round(age, 1), stale=age > STALE_AFTER_SECS)


_instants = st.one_of(st.none(), st.integers(T0 - 10**9, T0 + 10**9))


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.tuples(_instants, st.integers(T0 - 10**9, T0 + 10**9)), max_size=80))
def test_dated_remembered_is_dated_afresh(pairs: list[tuple[int | None, int]]) -> None:
    for at_ms, now_ms in [*pairs, *pairs]:  # the second round from the memo
        assert dated(at_ms, now_ms) == _dated_afresh(at_ms, now_ms)


def _outcome(name: str) -> tuple[str, str]:
    try:
        return "value", normalise_name(name)
    except ValueError as exc:
        return "error", str(exc)


def _outcome_afresh(name: str) -> tuple[str, str]:
    try:
        return "value", normalise_name.__wrapped__(name)
    except ValueError as exc:
        return "error", str(exc)


@settings(max_examples=examples(300), deadline=None)
@given(
    st.lists(
        st.one_of(st.text(max_size=12), st.sampled_from(["BTC/USDT", "btcusdt", "-/-", " "])),
        max_size=20,
    )
)
def test_normalise_name_remembered_is_normalise_name_afresh(names: list[str]) -> None:
    for name in [*names, *names]:
        assert _outcome(name) == _outcome_afresh(name)


@settings(max_examples=examples(300), deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(st.sampled_from(["*", "BTC/*", "*/USDT", "S?L/*", "[BE]*", "x"]), max_size=3),
            st.sampled_from(["BTC/USDT", "ETH/USDT", "SOL/USDT", "x", ""]),
        ),
        max_size=30,
    )
)
def test_rule_matching_remembered_is_fnmatch_afresh(cases: list[tuple[list[str], str]]) -> None:
    for patterns, ticker in [*cases, *cases]:
        afresh = any(fnmatch.fnmatchcase(ticker, p) for p in patterns)
        assert matches_any(tuple(patterns), ticker) is afresh


_names = st.sampled_from(["ticker:btc:decision", "ticker:btc:review", "ticker:eth:decision", "x"])
_ops = st.lists(
    st.one_of(
        st.tuples(st.just("set"), _names, st.integers(1, 100)),
        st.tuples(st.just("set_elsewhere"), _names, st.integers(1, 100)),
        st.tuples(st.just("delete"), _names, st.just(0)),
        st.tuples(st.just("get"), _names, st.just(0)),
        st.tuples(st.just("advance"), st.just(""), st.integers(1, 120)),
        st.tuples(
            st.just("keys"), st.sampled_from(["", "ticker:", "ticker:btc:", "y"]), st.just(0)
        ),
        st.tuples(st.just("restart"), st.just(""), st.just(0)),
    ),
    max_size=40,
)


def _keys_afresh(store: SessionStore, prefix: str) -> list[str]:
    listed: set[str] = store._l2_keys or set()
    return sorted(k for k in listed | set(store._l1) if k.startswith(prefix))


def _apply(
    store: SessionStore, other: SessionStore, clock: InstantClock, op: tuple[str, str, int]
) -> Any:
    kind, name, n = op
    if kind == "set":
        store.set(name, n, ttl_secs=n)
    elif kind == "set_elsewhere":  # another process (the operator's CLI) writes the file
        other.set(name, n, ttl_secs=n)
    elif kind == "delete":
        store.delete(name)
    elif kind == "get":
        store.get(name)
    elif kind == "advance":
        clock.advance(n)
    return None


@settings(max_examples=examples(200), deadline=None)
@given(_ops)
def test_session_keys_remembered_are_the_keys_of_both_levels(
    ops: list[tuple[str, str, int]],
) -> None:
    clock = InstantClock(epoch_ms=T0)
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch) / "sessions"
        store = SessionStore(directory, clock, durable=False)
        other = SessionStore(directory, clock, durable=False)
        for op in ops:
            if op[0] == "restart":
                store = SessionStore(directory, clock, durable=False)
            elif op[0] == "keys":
                assert store.keys(op[1]) == _keys_afresh(store, op[1])
                assert [e.key for e in store.live(op[1])] == [
                    k for k in _keys_afresh(store, op[1]) if store.entry(k) is not None
                ]
            else:
                _apply(store, other, clock, op)
        assert store.keys() == _keys_afresh(store, "")
