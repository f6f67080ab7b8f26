"""``KeptForms``: a snapshot's rounded and compact forms with some top-level entries' pairs kept
from the snapshots before. Whatever came before, each answer is ``rounded_and_compact``'s: the
same values of the same types, zeros with their signs, the same errors; a NaN where a null was,
``1.0`` where ``1`` was, a subclass or a model where its base was, are never taken for the entry
kept. And a real snapshot's forms are the plain walk's while its recent trades repeat."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from property_budget import examples
from snapshot_walks_support import Model
from test_snapshot_walks import _Float, _Int, _json, _same_outcome, _Str, _values

from agent.snapshot import _KEPT_FORMS
from agent.snapshot_walks import KeptForms, rounded_and_compact

FIELDS = ("recent_trades", "unavailable", "paxg")
_names = st.sampled_from([*FIELDS, "schema_version", "price", "tickers"])
#: values that look alike to a careless key: equal, or written alike by orjson
_lookalikes = st.sampled_from(
    [
        None,
        float("nan"),
        float("inf"),
        1,
        1.0,
        True,
        _Int(1),
        _Float(1.0),
        0.0,
        -0.0,
        "1",
        _Str("1"),
        Model(),
        [1],
        (1,),
        {"a": 1},
        {"a": 1.0},
        {"a": None},
        {"a": float("nan")},
        {"a": -0.0},
        {"a": 0.0},
        {1: "a"},
        {"b": 1, "a": 1},
        {"a": 1, "b": 1},
        {"unavailable": {"a": "why"}, "a": None},
    ]
)
_entry = st.one_of(_lookalikes, _json, _values)
_snapshot = st.dictionaries(_names, _entry, max_size=6)


@settings(max_examples=examples(400), deadline=None)
@given(st.lists(_snapshot, min_size=1, max_size=6), st.data())
def test_kept_forms_answer_as_the_walk_whatever_came_before(
    snapshots: list[dict[str, Any]], data: st.DataObject
) -> None:
    kept = KeptForms(FIELDS)
    # each snapshot again, then with its kept entries swapped for look-alikes: the memo's hits
    # and its near misses
    for snapshot in snapshots:
        alike = {k: data.draw(_lookalikes) if k in FIELDS else v for k, v in snapshot.items()}
        for value in (snapshot, snapshot, alike, snapshot):
            assert _same_outcome(kept.both, rounded_and_compact, value)


def test_a_lookalike_never_takes_the_kept_pair() -> None:
    """The cases a bytes-only or an equality-only key would get wrong, one after another."""
    kept = KeptForms(("x",))
    for a, b in [
        ({"a": None}, {"a": float("nan")}),
        ({"a": 1}, {"a": 1.0}),
        ({"a": 1}, {"a": True}),
        ({"a": 0.0}, {"a": -0.0}),
        ({"a": 1}, {"a": _Int(1)}),
        ([1, 2], (1, 2)),
    ]:
        for value in ({"x": a}, {"x": b}, {"x": a}):
            assert _same_outcome(kept.both, rounded_and_compact, value)


def test_a_snapshots_forms_keep_the_recent_trades_pair_while_they_repeat() -> None:
    from snapshot_walks_support import hostile_snapshot as make_snapshot  # a real MarketSnapshot

    trades = [{"ticker": "BTC/USDT", "pnl_pct": -0.5, "signals": {"rsi": 0.25}}]
    first = make_snapshot().model_copy(update={"recent_trades": trades})
    second = first.model_copy(update={"recent_trades": [dict(t) for t in trades]})
    for snapshot in (first, second):
        assert snapshot.forms().sent == rounded_and_compact(snapshot.model_dump(mode="json"))[0]
        assert snapshot.forms().compact == rounded_and_compact(snapshot.model_dump(mode="json"))[1]
    assert first.forms().sent["recent_trades"] is second.forms().sent["recent_trades"]
    assert "recent_trades" in _KEPT_FORMS.fields
