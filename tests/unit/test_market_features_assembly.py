"""``FeatureTracker`` sets its ``TickFeatures`` up without validating them field by field: whatever
ticks and closes came (NaN, inf, 0, negative prices, out-of-order and repeated instants), the
features must be the model validation builds from the same values, of the same types."""

from __future__ import annotations

import math
import pickle
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from market_test_support import candle_series, make_tick
from model_support import assert_made_as_validated
from property_budget import examples

import market.features as features_module
from core.events import Timeframe
from market.features import FeatureTracker, TickFeatures

STEP = 900_000
T0 = 1_740_787_200_000  # 2025-03-01 00:00 UTC
TICKERS = ("BTC/USDT", "ETH/USDT")
TIMEFRAME_STEP_MS: dict[Timeframe, int] = {"15m": STEP, "1h": 4 * STEP, "4h": 16 * STEP}

wide = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, math.nan, math.inf, -math.inf, 100.0, 100.0, 101.5]),
)
#: closes stay prices: a close of 0 divides the next return (closes past float's range are
#: ``test_market_features``'s)
closes = st.floats(min_value=1e-6, max_value=1e9)


def validated(values: dict[str, Any]) -> TickFeatures:
    return TickFeatures.model_validate(values)


def fresh_validated(
    tracker: FeatureTracker, ticker: str, monkeypatch: pytest.MonkeyPatch
) -> TickFeatures:
    """The tracker's features made afresh from its state, through pydantic's validation."""
    with monkeypatch.context() as patched:
        patched.setattr(features_module, "_assemble", validated)
        return tracker._compute(ticker, tracker._tickers[ticker])


@settings(max_examples=examples(150), deadline=None)
@given(
    steps=st.lists(
        st.tuples(
            st.sampled_from(TICKERS),
            st.integers(-2, 40),  # updates of 75 s forward (<= 0: the same instant or older)
            st.sampled_from(list(TIMEFRAME_STEP_MS)),
            wide,  # tick price
            wide,  # tick volume
            st.one_of(st.none(), closes),  # a 15m close first, at this price
        ),
        min_size=1,
        max_size=50,
    )
)
def test_features_are_the_validated_model_of_their_values(
    steps: list[tuple[str, int, Timeframe, float, float, float | None]],
) -> None:
    monkeypatch = pytest.MonkeyPatch()
    tracker = FeatureTracker()
    for ticker in TICKERS:
        for candle in candle_series([100.0 + (i % 7) for i in range(100)], start_ms=T0):
            tracker.on_close(ticker, "15m", candle)
    at_ms = T0 + 100 * STEP + 1_000
    for ticker, forward, timeframe, price, volume, close in steps:
        at_ms += forward * 75_000
        if close is not None:
            open_ms = at_ms - at_ms % STEP - STEP
            tracker.on_close(ticker, "15m", candle_series([close], start_ms=open_ms)[0])
        step = TIMEFRAME_STEP_MS[timeframe]
        tick = make_tick(
            ticker=ticker,
            timeframe=timeframe,
            open_ms=at_ms - at_ms % step,
            event_ms=at_ms,
            c=price,
            v=volume,
        )
        tracker.on_tick(tick)
        got = tracker.features(ticker)
        assert got is not None
        assert_made_as_validated(got, fresh_validated(tracker, ticker, monkeypatch), TickFeatures)
        assert_made_as_validated(got, validated(dict(vars(got))), TickFeatures)


def test_the_features_copy_pickle_and_refuse_changes_like_validated_ones() -> None:
    tracker = FeatureTracker()
    tracker.on_tick(make_tick(event_ms=T0 + 1_000, c=105.0))
    got = tracker.features("BTC/USDT")
    assert got is not None and got.unavailable  # no history: every reason is there
    want = validated(dict(vars(got)))
    assert got == want
    assert_made_as_validated(pickle.loads(pickle.dumps(got)), want, TickFeatures)
    update = {"return_zscore": 1.5}
    assert_made_as_validated(
        got.model_copy(update=update), want.model_copy(update=update), TickFeatures
    )
    with pytest.raises(ValueError):
        got.price = 1.0  # type: ignore[misc]
    tracker.on_tick(make_tick(event_ms=T0 + 2_000, c=106.0))
    again = tracker.features("BTC/USDT")
    assert again is not None
    assert again.model_fields_set is not got.model_fields_set  # each has its own
    assert again.unavailable is not got.unavailable
