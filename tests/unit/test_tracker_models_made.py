"""The tracker's models made without pydantic's validation (``core.unvalidated``): the safety
verdict, the fallback score and a position's review are the models validation makes, equal,
with the same dumps, fields set and field types, for float inputs and for odd ones (an int
price) that are validated as before."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from property_budget import examples
from pydantic import BaseModel

from tracker.agent_layer import position_review
from tracker.config import TrackerConfig
from tracker.ports import PositionReview
from tracker.positions import TrackedPosition
from tracker.safety import SafetyVerdict, safety_verdict
from tracker.score import FallbackScore, ScoreComponents, fallback_score

_prices = st.one_of(
    st.sampled_from([100, 100.0, 91.0, 89.99, 108.0, 110, 110.5, 96.8, 0.5]),
    st.floats(min_value=0.01, max_value=1e6),
)
_regimes = st.sampled_from(["unknown", "low_volatility_x", "high_volatility_goldilocks", ""])


def _fields(model: BaseModel) -> dict[str, Any]:
    return {name: getattr(model, name) for name in type(model).model_fields}


def _same_model(made: BaseModel, validated: BaseModel) -> None:
    assert type(made) is type(validated)
    assert made == validated
    assert made.model_dump_json() == validated.model_dump_json()
    assert made.model_fields_set == validated.model_fields_set
    assert [type(v) for v in _fields(made).values()] == [
        type(v) for v in _fields(validated).values()
    ]


@settings(max_examples=examples(200), deadline=None)
@given(
    entry=_prices,
    price=_prices,
    high=_prices,
    armed=st.sampled_from([False, True, 0, 1]),
)
def test_a_safety_verdict_is_the_verdict_validated(
    entry: float, price: float, high: float, armed: bool
) -> None:
    made = safety_verdict(entry, price, high, armed, TrackerConfig())
    _same_model(made, SafetyVerdict(**_fields(made)))


@settings(max_examples=examples(200), deadline=None)
@given(
    regime_at_entry=_regimes,
    regime_now=_regimes,
    prices=st.lists(_prices, max_size=5),
    btc=st.one_of(st.none(), st.sampled_from([-6, -2.5, 0.0, 3.0])),
    is_btc=st.booleans(),
    pnl=st.sampled_from([-4.0, 0.0, 1.5, 6]),
    peak=st.sampled_from([0.0, 2.0, 8.0]),
    holding=st.sampled_from([0.0, 90_000.0, 200_000]),
)
def test_a_fallback_score_is_the_score_validated(
    regime_at_entry: str,
    regime_now: str,
    prices: list[float],
    btc: float | None,
    is_btc: bool,
    pnl: float,
    peak: float,
    holding: float,
) -> None:
    made = fallback_score(
        regime_at_entry=regime_at_entry,
        regime_now=regime_now,
        recent_prices=prices,
        btc_change_1h_pct=btc,
        is_btc=is_btc,
        pnl_pct=pnl,
        peak_pnl_pct=peak,
        holding_secs=holding,
        config=TrackerConfig(),
    )
    components = ScoreComponents(**_fields(made.components))
    _same_model(made.components, components)
    _same_model(made, FallbackScore(**{**_fields(made), "components": components}))


@settings(max_examples=examples(200), deadline=None)
@given(
    price=_prices,
    signals=st.dictionaries(st.sampled_from(["rsi", "macd"]), st.floats(-1, 1)),
    regime_now=_regimes,
)
def test_a_position_review_is_the_review_validated(
    price: float, signals: dict[str, float], regime_now: str
) -> None:
    position = TrackedPosition(
        ticker="BTC/USDT",
        entry_price=100.0,
        quantity=1.0,
        entry_time_ms=1_000,
        signals=signals,
        regime="low_volatility_x",
        trailing_high=105.0,
    )
    made = position_review(position, price, regime_now, 61_000)
    _same_model(made, PositionReview(**_fields(made)))
    assert made.entry_signals is not position.signals
