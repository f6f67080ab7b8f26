"""``FeatureTracker.features`` writes the value paths out and looks the changes' reference closes
up once per bucket (once per instant for a base timeframe the horizons are not whole candles of):
whatever ticks, closes and corrections came, its features are the ones computed afresh from the
tracker's state by the plain definition, field for field and reason for reason, in order."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st
from market_test_support import candle_series, make_tick
from property_budget import examples

from core.events import Timeframe
from market.features import CHANGE_HORIZONS_MS, FeatureTracker, _Ticker
from market.timeframes import TIMEFRAME_MS

T0 = 1_740_787_200_000  # 2025-03-01 00:00 UTC
TICKER = "BTC/USDT"


def plain(tracker: FeatureTracker, state: _Ticker) -> dict[str, Any]:
    """The features by their definition, from the state's closes, volumes and returns only (the
    volume ratio and the z-score as their own methods give them, reason or value)."""
    step, at_ms, price = tracker._step_ms, state.at_ms, state.price
    values: dict[str, Any] = {"ticker": TICKER, "at_ms": at_ms, "price": price}
    unavailable: dict[str, str] = {}
    volume_ratio, reason = tracker._volume_ratio(state)
    if reason:
        unavailable["volume_ratio"] = reason
    zscore, reason = tracker._zscore(state)
    if reason:
        unavailable["return_zscore"] = reason
    for name, horizon in CHANGE_HORIZONS_MS.items():
        target = at_ms - horizon
        open_ms = target - target % step - step
        close = state.closes.get(open_ms)
        if close is None:
            unavailable[name] = tracker._missing_reason(state, open_ms)
            values[name] = None
        else:
            values[name] = (price / close - 1.0) * 100.0
    values.update(volume_ratio=volume_ratio, return_zscore=zscore, unavailable=unavailable)
    return values


def same(a: object, b: object) -> bool:
    return a == b or (
        isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)
    )


prices = st.one_of(
    st.floats(min_value=1e-3, max_value=1e6), st.sampled_from([0.0, math.nan, math.inf, 100.0])
)
step_kinds = st.sampled_from(["tick", "tick", "tick", "close", "correct"])


@settings(max_examples=examples(300), deadline=None)
@given(
    base=st.sampled_from(["15m", "4h", "5m"]),
    history=st.integers(0, 120),
    flat=st.booleans(),  # a history of equal closes: returns with zero spread
    steps=st.lists(
        st.tuples(
            step_kinds,
            st.integers(-1, 30),  # instants of 75 s forward (<= 0: the same instant or older)
            st.sampled_from(list(TIMEFRAME_MS)),
            prices,
            st.one_of(st.floats(min_value=0.0, max_value=1e4), st.just(math.nan)),
        ),
        min_size=1,
        max_size=60,
    ),
)
# a close, then a correction, in the bucket whose references were looked up before it
@example(
    base="15m",
    history=0,
    flat=False,
    steps=[("tick", 0, "15m", 200.0, 1.0), ("close", 1, "15m", 150.0, 1.0)],
)
@example(
    base="15m",
    history=30,
    flat=False,
    steps=[
        ("tick", 0, "15m", 200.0, 1.0),
        ("close", 1, "15m", 150.0, 1.0),
        ("tick", 40, "15m", 200.0, 1.0),
        ("correct", 1, "15m", 0.5, 1.0),
    ],
)
def test_features_are_the_plain_definition_of_the_state(
    base: Timeframe,
    history: int,
    flat: bool,
    steps: list[tuple[str, int, Timeframe, float, float]],
) -> None:
    tracker = FeatureTracker(timeframe=base)
    step = TIMEFRAME_MS[base]
    if history:
        for candle in candle_series(
            [100.0 + (i % 5) * (not flat) for i in range(history)], step_ms=step
        ):
            tracker.on_close(TICKER, base, candle)
    at_ms = T0 + history * step + 1_000
    for kind, forward, timeframe, price, volume in steps:
        at_ms += forward * 75_000
        open_ms = at_ms - at_ms % step - step
        if kind == "close" and price > 0.0 and math.isfinite(price):
            tracker.on_close(
                TICKER, base, candle_series([price], start_ms=open_ms, step_ms=step)[0]
            )
        elif kind == "correct" and price > 0.0 and math.isfinite(price):
            last = tracker._tickers[TICKER].last_open_ms if TICKER in tracker._tickers else -1
            if last >= 0:
                candle = candle_series([price], start_ms=last, step_ms=step, volumes=[volume])[0]
                tracker.on_correct(TICKER, base, candle)
        tf_step = TIMEFRAME_MS[timeframe]
        tick = make_tick(
            timeframe=timeframe, open_ms=at_ms - at_ms % tf_step, event_ms=at_ms, c=price, v=volume
        )
        tracker.on_tick(tick)
        got = tracker.features(TICKER)
        assert got is not None
        want = plain(tracker, tracker._tickers[TICKER])
        have = dict(vars(got))
        assert list(have) == list(want)
        assert all(same(have[k], want[k]) for k in want), (have, want)
        assert list(got.unavailable.items()) == list(want["unavailable"].items())
