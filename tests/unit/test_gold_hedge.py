"""The gold hedge reading of PAXG against BTC (regime context)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from regime.gold_hedge import GoldSignal, read_gold_hedge


def _paxg(return_4h_pct: Any, price: Any = 2_900.0) -> dict[str, Any]:
    return {"symbol": "PAXGUSDT", "price": price, "return_4h_pct": return_4h_pct}


@pytest.mark.parametrize(
    ("gold", "btc", "signal"),
    [
        (0.5, -2.0, GoldSignal.FLIGHT_TO_SAFETY),
        (0.3, -1.0, GoldSignal.FLIGHT_TO_SAFETY),  # both thresholds inclusive
        (-0.4, 1.5, GoldSignal.RISK_ON),
        (0.5, 0.5, GoldSignal.NEUTRAL),  # gold and BTC up together: no flight
        (0.1, -3.0, GoldSignal.NEUTRAL),  # BTC falls, gold barely moves
        (-0.5, -2.0, GoldSignal.NEUTRAL),
    ],
)
def test_opposite_moves_of_gold_and_btc_are_named(
    gold: float, btc: float, signal: GoldSignal
) -> None:
    hedge = read_gold_hedge(_paxg(gold), btc)
    assert hedge.signal is signal
    assert f"PAXG {gold:+.2f} %" in hedge.reason


def test_missing_sides_are_unavailable_with_the_side_named() -> None:
    assert read_gold_hedge(None, -2.0).reason == "PAXG 4h return unavailable"
    assert read_gold_hedge(_paxg(None), -2.0).signal is GoldSignal.UNAVAILABLE
    assert read_gold_hedge(_paxg(0.5), None).reason == "BTC 4h return unavailable"


@given(
    st.one_of(
        st.none(),
        st.dictionaries(
            st.sampled_from(["price", "return_4h_pct", "symbol", "junk"]),
            st.one_of(st.none(), st.booleans(), st.text(max_size=5), st.floats(), st.integers()),
        ),
    ),
    st.one_of(st.none(), st.floats(min_value=-90, max_value=900)),
)
def test_any_paxg_value_gives_a_reading_never_an_error(
    paxg: dict[str, Any] | None, btc: float | None
) -> None:
    hedge = read_gold_hedge(paxg, btc)
    assert hedge.reason
    if hedge.signal is not GoldSignal.UNAVAILABLE:
        assert hedge.paxg_return_4h_pct is not None and btc is not None
    for figure in (hedge.paxg_price, hedge.paxg_return_4h_pct):
        assert figure is None or abs(figure) < float("inf")
