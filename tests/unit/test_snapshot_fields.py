"""``FieldForms``: a snapshot's rounded and compact forms read from its fields answer as the walk
over its JSON dump (``KeptForms.both(model_dump(mode="json"))``), whatever came before: the same
values of the same types, zeros with their signs, the same errors. Odd values (tuples, subclasses,
models, NaNs, ints in float fields, int keys, odd names) are sent the dump's way; timeframe
summaries held again, or changed in place, answer as a fresh walk; real snapshots take the fields'
way."""

from __future__ import annotations

from typing import Any

import pytest
from fakes.claude_support import snapshot as plain_snapshot
from hypothesis import given, settings
from hypothesis import strategies as st
from property_budget import examples
from test_snapshot_kept_forms import _lookalikes
from test_snapshot_walks import _Float, _floats, _Int, _json, _same_outcome, _values

from agent.indicators import TimeframeSummary
from agent.snapshot import _KEPT_FORMS, MarketSnapshot, TickerSnapshot
from agent.snapshot_fields import FieldForms, SummaryPairs
from agent.snapshot_walks import KeptForms, rounded_and_compact

pytestmark = pytest.mark.filterwarnings(
    "ignore:Pydantic serializer warnings:UserWarning"
)  # odd values, on purpose
_RAW = ("recent_trades", "ts_posteriors", "paxg", "open_interest", "historical_insights")
#: mostly what real snapshots hold (whole snapshots take the fields' way), sometimes not
_float_ish = st.one_of(
    _floats,
    _floats,
    _floats,
    st.none(),
    st.sampled_from([1, True, _Int(2), _Float(2.5)]),
)
_tf_names = st.sampled_from(
    ["15m", "1h", "4h", "15m", "1h", "4h", "unavailable", "schema_version", 1]
)
_ticker_names = st.sampled_from(["BTC/USDT", "ETH/USDT", "BTC/USDT", "ETH/USDT", "unavailable", 7])
_raw_values = st.one_of(_json, _json, _json, _lookalikes, _values)


@st.composite
def _summary(draw: st.DrawFn) -> TimeframeSummary:
    fields: dict[str, Any] = {
        "trend": draw(st.sampled_from(["up", "down", "flat", None, 1])),
        "bollinger_position": draw(_float_ish),
        "rsi": draw(_float_ish),
        "unavailable": draw(
            st.one_of(
                st.dictionaries(st.sampled_from(["rsi", "trend"]), st.just("why"), max_size=2),
                st.just({"rsi": 1}),
            )
        ),
    }
    return TimeframeSummary.model_construct(None, **fields)


@st.composite
def _ticker(draw: st.DrawFn, pool: list[TimeframeSummary]) -> Any:
    names = [n for n in TickerSnapshot.model_fields if n != "multi_tf"]
    fields: dict[str, Any] = {n: draw(_float_ish) for n in names}
    fields["multi_tf"] = draw(st.dictionaries(_tf_names, st.sampled_from(pool), max_size=3))
    ticker = TickerSnapshot.model_construct(None, **fields)
    return draw(st.sampled_from([ticker] * 5 + [{"price": 1.0}]))


@st.composite
def _snapshots(draw: st.DrawFn) -> list[MarketSnapshot]:
    pool = draw(st.lists(_summary(), min_size=1, max_size=4))
    base = plain_snapshot()
    made = []
    for _ in range(draw(st.integers(1, 5))):
        tickers = draw(st.dictionaries(_ticker_names, _ticker(pool), max_size=3))
        update: dict[str, Any] = {"tickers": tickers, "btc_price": draw(_float_ish)}
        for name in draw(st.sets(st.sampled_from(_RAW))):
            update[name] = draw(_raw_values)
        made.append(base.model_copy(update=update))
        if draw(st.booleans()):  # a summary's reasons changed in place, as a frozen model's can be
            changed = draw(st.sampled_from(pool))
            reason: Any = draw(st.sampled_from(["why", 1]))
            changed.unavailable["bollinger_position"] = reason
    return made


def _fresh() -> tuple[FieldForms, KeptForms]:
    kept = KeptForms(tuple(_KEPT_FORMS.fields))
    return FieldForms(MarketSnapshot, TickerSnapshot, kept), kept


@settings(max_examples=examples(300), deadline=None)
@given(_snapshots())
def test_the_fields_forms_answer_as_the_dumps_walk_whatever_came_before(
    snapshots: list[MarketSnapshot],
) -> None:
    fields, kept = _fresh()
    reference = KeptForms(tuple(_KEPT_FORMS.fields))

    def made(snapshot: MarketSnapshot) -> Any:
        got = fields.pair(snapshot)
        return got if got is not None else kept.both(snapshot.model_dump(mode="json"))

    for snapshot in [*snapshots, *snapshots]:  # each again: the kept pairs' and summaries' hits
        assert _same_outcome(made, lambda s: reference.both(s.model_dump(mode="json")), snapshot)


def test_real_snapshots_take_the_fields_way_and_keep_their_summaries() -> None:
    fields, _ = _fresh()
    summary = TimeframeSummary(trend="up", bollinger_position=0.25, rsi=55.5, unavailable={})
    base = plain_snapshot()
    tickers = {
        t: v.model_copy(update={"multi_tf": {"1h": summary}}) for t, v in base.tickers.items()
    }
    trades = [{"ticker": "BTC/USDT", "pnl_pct": -0.5, "signals": {"rsi": 0.25}}]
    first = base.model_copy(update={"tickers": tickers, "recent_trades": trades})
    second = first.model_copy(update={"btc_price": 1.5})
    for snapshot in (first, second):
        assert fields.pair(snapshot) is not None
        assert _same_outcome(
            fields.pair, lambda s: rounded_and_compact(s.model_dump(mode="json")), snapshot
        )
    pairs = [fields.pair(s) for s in (first, second)]
    held = [p[0]["tickers"]["BTC/USDT"]["multi_tf"]["1h"] for p in pairs if p is not None]
    assert held[0] is held[1]  # the summary's pair kept


def test_a_summary_changed_in_place_is_walked_again() -> None:
    pairs = SummaryPairs()
    summary = TimeframeSummary(trend=None, bollinger_position=0.5, rsi=None, unavailable={})
    assert pairs.pair(summary)[1] == {"trend": None, "bollinger_position": 0.5, "rsi": None}
    summary.unavailable["trend"] = "needs 50 closes, have 3"
    assert pairs.pair(summary) == rounded_and_compact(summary.model_dump(mode="json"))
    object.__setattr__(summary, "rsi", 40.0)
    assert pairs.pair(summary)[0]["rsi"] == 40.0


@pytest.mark.parametrize(
    "update",
    [
        {"recent_trades": [{"a": (1, 2)}]},
        {"recent_trades": [{"a": float("nan")}]},
        {"paxg": {1: "a"}},
        {"ts_posteriors": {"t": {1: "a"}}},
        {"historical_insights": [{"a": _Int(1)}]},
        {
            "tickers": {
                "BTC/USDT": plain_snapshot().tickers["BTC/USDT"].model_copy(update={"price": 1})
            }
        },
        {"tickers": {"unavailable": plain_snapshot().tickers["BTC/USDT"]}},
        {"tickers": {"schema_version": plain_snapshot().tickers["BTC/USDT"]}},
    ],
)
def test_values_the_dump_changes_go_the_dumps_way(update: dict[str, Any]) -> None:
    fields, _ = _fresh()
    snapshot = plain_snapshot().model_copy(update=update)
    assert fields.pair(snapshot) is None
    assert _same_outcome(
        lambda s: (s.forms().sent, s.forms().compact),
        lambda s: rounded_and_compact(s.model_dump(mode="json")),
        snapshot,
    )


def test_a_lookalike_of_a_kept_entry_never_takes_its_pair() -> None:
    """Entries read from the fields, one after another, that a bytes-only or an equality-only
    comparison with the entry kept would take for it."""
    fields, kept = _fresh()
    reference = KeptForms(tuple(_KEPT_FORMS.fields))
    for a, b in [
        ({"a": None}, {"a": float("nan")}),
        ({"a": 1}, {"a": 1.0}),
        ({"a": 1}, {"a": True}),
        ({"a": 0.0}, {"a": -0.0}),
        ({"a": 1}, {"a": _Int(1)}),
        ([1, 2], (1, 2)),
    ]:
        for value in (a, b, a):
            snapshot = plain_snapshot().model_copy(update={"paxg": value})
            assert _same_outcome(
                lambda s: fields.pair(s) or kept.both(s.model_dump(mode="json")),
                lambda s: reference.both(s.model_dump(mode="json")),
                snapshot,
            )
