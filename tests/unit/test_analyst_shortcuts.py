"""The analysts' per-decision short ways answer as the long ways they stand in for."""

from __future__ import annotations

import dataclasses
import math
from datetime import UTC, datetime
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from property_budget import examples

from memory import analyst_model
from memory.analyst_model import DAY_MS, utc_day
from memory.analyst_reports import _finite, _num, market_report
from memory.analyst_store import AnalystStore
from memory.analysts import SPECS, AnalystController


def _day_computed(at_ms: int) -> str:
    return datetime.fromtimestamp(at_ms / 1000, UTC).date().isoformat()


_instants = st.one_of(
    st.integers(-(10**12), 4 * 10**12),
    # the last and first ms of days, where a remembered day must end
    st.integers(-100, 40_000).flatmap(
        lambda d: st.sampled_from([d * DAY_MS - 1, d * DAY_MS, d * DAY_MS + 1])
    ),
)


@settings(max_examples=examples(500), deadline=None)
@given(st.lists(_instants, min_size=1, max_size=20))
def test_the_remembered_day_is_the_day_computed_again(instants: list[int]) -> None:
    for at_ms in instants:
        assert utc_day(at_ms) == _day_computed(at_ms)
    assert utc_day(instants[0] + 0.5) == _day_computed(instants[0] + 0.5)  # type: ignore[arg-type]


def test_a_day_is_remembered_until_its_last_ms() -> None:
    start = 20_000 * DAY_MS
    utc_day(start + 5)
    assert analyst_model._last_day == (start, _day_computed(start))
    assert utc_day(start + DAY_MS - 1) == _day_computed(start)
    assert utc_day(start + DAY_MS) == _day_computed(start + DAY_MS) != _day_computed(start)


@given(
    st.one_of(
        st.floats(),
        st.integers(-(10**30), 10**30),
        st.booleans(),
        st.none(),
        st.text(max_size=3),
    )
)
def test_finite_is_num(value: Any) -> None:
    try:
        expected = _num(value)
    except OverflowError:  # an integer beyond floats: both refuse it
        try:
            _finite(value)
        except OverflowError:
            return
        raise AssertionError("_finite took an integer _num refuses") from None
    got = _finite(value)
    assert got == expected or (got is None and expected is None)
    assert got is None or (type(got) is float and math.isfinite(got))


@settings(max_examples=examples(300), deadline=None)
@given(
    price=st.one_of(st.floats(), st.integers(-5, 10**9), st.none(), st.just("1")),
    figure=st.one_of(st.floats(), st.none(), st.integers(-100, 100)),
    trend=st.one_of(st.sampled_from(["up", "down", "flat", ""]), st.none(), st.just(3)),
    frames=st.sets(st.sampled_from(["15m", "1h", "4h", "1d"])),
)
def test_market_report_figures_and_text_follow_the_view(
    price: Any, figure: Any, trend: Any, frames: set[str]
) -> None:
    summary = {"rsi": figure, "bollinger_position": figure, "trend": trend}
    view = {"price": price, "change_1h_pct": figure, "multi_tf": {tf: summary for tf in frames}}
    built = market_report({"tickers": {"BTC/USDT": view}}, "BTC/USDT")
    if _num(price) is None:
        assert built is None
        return
    assert built is not None
    content, _confidence, figures, labels = built
    shown = [tf for tf in ("15m", "1h", "4h") if tf in frames]
    assert figures["price"] == _num(price) and figures["change_1h_pct"] == _num(figure)
    assert figures["return_4h_pct"] is None
    for tf in shown:
        assert figures[f"rsi_{tf}"] == _num(figure) == figures[f"percent_b_{tf}"]
    assert set(labels) == ({f"trend_{tf}" for tf in shown} if isinstance(trend, str) else set())
    assert content.count("RSI") == len(shown) and content.startswith("BTC/USDT at ")


_regimes = st.one_of(
    st.none(),
    st.just("not a mapping"),
    st.fixed_dictionaries(
        {
            "crypto": st.dictionaries(
                st.sampled_from(["BTC/USDT", "ETH/USDT"]), st.sampled_from(["bull", "bear"])
            ),
            "macro": st.sampled_from(["goldilocks", "stagflation"]),
            "exposure_scale": st.sampled_from([0.5, 1.0]),
        },
        optional={"combined": st.sampled_from(["bull/goldilocks", "x"])},
    ),
)


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.tuples(_regimes, st.integers(0, 3 * DAY_MS)), min_size=1, max_size=12))
def test_regime_reports_asked_by_labels_first_are_those_built(
    steps: list[tuple[Any, int]],
) -> None:
    """The regime analyst asks only its labels while they are the day's last report's: the
    reports written are those building every report and comparing its labels would write."""
    regime = next(s for s in SPECS if s.name == "regime")
    assert regime.labels is not None
    written = []
    for spec in (regime, dataclasses.replace(regime, labels=None)):
        controller = AnalystController(spec, AnalystStore(":memory:"))
        at_ms = 20_000 * DAY_MS
        reports = []
        for value, step in steps:
            at_ms += step
            for ticker in ("BTC/USDT", "ETH/USDT"):
                sent = {} if value is None else {"regime": value}
                reports.append(controller.observe(sent, ticker, at_ms))
        written.append([None if r is None else r.model_dump() for r in reports])
    assert written[0] == written[1]
