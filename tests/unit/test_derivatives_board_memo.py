"""``BoardMemo`` hands the last board metrics out again only while their inputs are the last
ones: over polls that keep, copy, rebuild or change the funding rates and the Fear & Greed value
(signed zeros, ints for floats, strings, NaNs, a missing value) and sometimes bring open interest
or long/short positioning, each answer is what ``board_metrics(values)`` computes afresh."""

from __future__ import annotations

import math
import struct
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from property_budget import examples

from derivatives.monitor import BoardMemo, board_metrics

TICKERS = ("BTC/USDT", "ETH/USDT", "SOL/USDT")
RATES = st.sampled_from([0.0, -0.0, 1e-4, -1e-4, math.nan, 1, 0]) | st.floats(-0.01, 0.01)
FEAR_GREED = st.sampled_from(
    [
        None,
        {},
        {"value": 54},
        {"value": 54.0},
        {"value": "54"},
        {"value": 0.0},
        {"value": -0.0},
        {"value": math.nan},
        {"value": 25, "classification": "Fear"},
    ]
)
OPEN_INTEREST = {"BTC/USDT": {"value_usd": 2.0e9, "first_value_usd": 1.9e9}}
LONG_SHORT = {"ETH/USDT": {"ratio": 1.4}}


def _twin(value: Any) -> Any:
    """An equal value in another object (the same bits for a float)."""
    if isinstance(value, float):
        return struct.unpack("d", struct.pack("d", value))[0]
    return value


def _bits(metrics: dict[str, float | None]) -> list[tuple[str, str | None]]:
    return [(k, None if v is None else float(v).hex()) for k, v in metrics.items()]


polls = st.lists(
    st.tuples(
        st.sampled_from(["same dict", "copied", "twins", "new", "changed in place"]),
        st.dictionaries(st.sampled_from(TICKERS), RATES, max_size=3),
        st.sampled_from(["kept", "twin", "new"]),
        FEAR_GREED,
        st.sampled_from([None, {}, OPEN_INTEREST]),
        st.sampled_from([None, {}, LONG_SHORT]),
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=examples(400), deadline=None)
@given(polls=polls)
def test_the_memo_answers_as_board_metrics_afresh(polls: list[tuple[Any, ...]]) -> None:
    memo = BoardMemo()
    funding: dict[str, Any] | None = None
    fear_greed: Any = None
    for how, rates, fg_how, new_fear_greed, open_interest, long_short in polls:
        if funding is None or how == "new":
            funding = dict(rates)
        elif how == "copied":
            funding = dict(funding)
        elif how == "twins":
            funding = {t: _twin(r) for t, r in funding.items()}
        elif how == "changed in place":
            funding.update(rates)
        if fg_how == "twin" and isinstance(fear_greed, dict):
            fear_greed = {k: _twin(v) for k, v in fear_greed.items()}
        elif fg_how == "new":
            fear_greed = None if new_fear_greed is None else dict(new_fear_greed)
        values = {
            "funding_rates": funding,
            "fear_greed": fear_greed,
            "open_interest": open_interest,
            "long_short_ratio": long_short,
        }
        assert _bits(memo(values)) == _bits(board_metrics(values))


def test_a_signed_zero_is_not_the_same_value() -> None:
    """Equal is not enough: a rate or Fear & Greed value turned from 0.0 to -0.0 (or back) is
    written with its sign, as board_metrics gives it."""
    memo = BoardMemo()
    funding: dict[str, Any] = {"BTC/USDT": 0.0}
    for rate, fear_greed in [(0.0, 0.0), (0.0, -0.0), (-0.0, -0.0), (0.0, 0), (0.0, -0.0)]:
        funding["BTC/USDT"] = rate  # in place, as a source that keeps its dict would
        values = {"funding_rates": funding, "fear_greed": {"value": fear_greed}}
        assert _bits(memo(values)) == _bits(board_metrics(values))
