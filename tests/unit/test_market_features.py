"""FeatureTracker: hand-computed changes, volume ratio and z-score; None with reasons; a
brute-force reference over wide random inputs."""

from __future__ import annotations

import itertools
import math
import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from market_test_support import candle_series, make_tick
from property_budget import examples

from core.bus import EventBus
from core.events import Candle, Timeframe, Topic
from market.aggregator import MultiTFAggregator
from market.features import FeatureTracker, TickFeatures

STEP = 900_000
T0 = 1_740_787_200_000  # 2025-03-01 00:00 UTC


def _feed(tracker: FeatureTracker, candles: list[Candle], ticker: str = "BTC/USDT") -> None:
    for candle in candles:
        tracker.on_close(ticker, "15m", candle)


def _tick(tracker: FeatureTracker, at_ms: int, price: float, volume: float = 1.0) -> TickFeatures:
    tracker.on_tick(
        make_tick(open_ms=at_ms - at_ms % STEP, event_ms=at_ms, c=price, h=1e9, low=1e-9, v=volume)
    )
    features = tracker.features("BTC/USDT")
    assert features is not None
    return features


def test_changes_against_the_close_at_or_before_each_horizon() -> None:
    tracker = FeatureTracker()
    _feed(tracker, candle_series([100.0 + i for i in range(97)], start_ms=T0))  # opens 0..96
    at = T0 + 97 * STEP + 60_000  # one minute into candle 97
    features = _tick(tracker, at, 250.0)
    # 1h back = 1 min into candle 93 -> the last close then is candle 92's (close 192)
    assert features.change_1h_pct == pytest.approx((250 / 192 - 1) * 100)
    assert features.change_1h_pct == pytest.approx(30.2083333333)
    assert features.change_4h_pct == pytest.approx((250 / 180 - 1) * 100)  # candle 80
    assert features.change_24h_pct == pytest.approx(150.0)  # candle 0, close 100
    assert features.price == 250.0 and features.at_ms == at
    # the tick is a 15m update with volume 1 after 60 s: projected from 90 s -> 10, mean 10
    assert features.volume_ratio == pytest.approx(1.0)
    assert features.unavailable == {}


def test_missing_history_gives_none_with_the_reason() -> None:
    tracker = FeatureTracker()
    assert tracker.features("BTC/USDT") is None
    features = _tick(tracker, T0 + 60_000, 100.0)
    assert features.change_1h_pct is None and features.return_zscore is None
    assert "no closed 15m candles yet" in features.unavailable["change_1h_pct"]
    assert "only 0 consecutive 15m return(s), need 20" in features.unavailable["return_zscore"]
    assert "only 0 closed 15m volume(s)" in features.unavailable["volume_ratio"]

    _feed(tracker, candle_series([100.0] * 8, start_ms=T0))  # 2 hours
    features = _tick(tracker, T0 + 8 * STEP + 60_000, 101.0)
    assert features.change_1h_pct == pytest.approx(1.0)
    assert features.change_24h_pct is None
    assert features.unavailable["change_24h_pct"].startswith("history too short")


def test_a_gap_at_the_reference_is_reported_not_bridged() -> None:
    tracker = FeatureTracker()
    candles = candle_series([100.0 + i for i in range(12)], start_ms=T0)
    del candles[6]  # the candle a 1h lookback from candle 12 needs (opens at 6 * STEP)
    _feed(tracker, candles)
    features = _tick(tracker, T0 + 11 * STEP + 30_000, 120.0)
    assert features.change_1h_pct is None
    assert "opening 2025-03-01T01:30Z is missing" in features.unavailable["change_1h_pct"]


def test_volume_ratio_prorates_the_forming_candle() -> None:
    tracker = FeatureTracker()
    volumes = [float(v) for v in range(1, 21)]  # mean 10.5
    _feed(tracker, candle_series([100.0] * 20, start_ms=T0, volumes=volumes))
    bucket = T0 + 20 * STEP
    # a third of the way in with 7 traded: projected 21 over a mean of 10.5
    assert _tick(tracker, bucket + STEP // 3, 100.0, volume=7.0).volume_ratio == pytest.approx(2.0)
    # 30 s in: projection starts at 10% of the candle (90 s), 1.05 -> 10.5 -> ratio 1
    early = T0 + 21 * STEP + 30_000
    tracker.on_close("BTC/USDT", "15m", candle_series([100.0], start_ms=bucket, volumes=[10.5])[0])
    assert _tick(tracker, early, 100.0, volume=1.05).volume_ratio == pytest.approx(
        1.05 * 10 / statistics.mean([*volumes[1:], 10.5])
    )


def test_volume_ratio_waits_for_the_forming_candle_of_now() -> None:
    tracker = FeatureTracker()
    _feed(tracker, candle_series([100.0] * 20, start_ms=T0))
    tracker.on_tick(make_tick(open_ms=T0 + 20 * STEP, event_ms=T0 + 20 * STEP + 10, v=3.0))
    # a 1h tick already in the next 15m bucket, before that bucket's first 15m update
    tracker.on_tick(make_tick(timeframe="1h", open_ms=T0 + 20 * STEP, event_ms=T0 + 21 * STEP + 5))
    features = tracker.features("BTC/USDT")
    assert features is not None and features.volume_ratio is None
    assert "no 15m update yet" in features.unavailable["volume_ratio"]


def _alternating_closes(n_returns: int) -> list[float]:
    closes = [100.0]
    for i in range(n_returns):
        closes.append(closes[-1] * (1.1 if i % 2 == 0 else 0.9))
    return closes


def test_return_zscore_hand_computed() -> None:
    tracker = FeatureTracker()
    closes = _alternating_closes(20)  # returns +10%, -10%, ...: mean 0, stdev sqrt(0.2 / 19)
    _feed(tracker, candle_series(closes, start_ms=T0))
    at = T0 + 21 * STEP + 1_000
    features = _tick(tracker, at, closes[-1] * 1.05)
    assert features.return_zscore == pytest.approx(0.05 / math.sqrt(0.2 / 19), rel=1e-9)
    assert features.return_zscore == pytest.approx(0.48734, abs=1e-5)


def test_return_zscore_needs_twenty_returns_and_a_fresh_close() -> None:
    tracker = FeatureTracker()
    closes = _alternating_closes(19)
    _feed(tracker, candle_series(closes, start_ms=T0))
    features = _tick(tracker, T0 + 20 * STEP + 1_000, 100.0)
    assert features.return_zscore is None
    assert "only 19 consecutive" in features.unavailable["return_zscore"]
    _feed(tracker, candle_series([closes[-1] * 1.1], start_ms=T0 + 20 * STEP))
    assert _tick(tracker, T0 + 21 * STEP + 1_000, 100.0).return_zscore is not None
    stale = _tick(tracker, T0 + 24 * STEP, 100.0)  # 3 candles later, still no close
    assert stale.return_zscore is None and "stale" in stale.unavailable["return_zscore"]


def test_returns_across_a_gap_are_not_taken() -> None:
    tracker = FeatureTracker(min_returns=2, return_window=5)
    head = candle_series([100.0, 110.0, 99.0], start_ms=T0)
    _feed(tracker, [*head, *candle_series([60.0, 66.0], start_ms=T0 + 10 * STEP)])
    features = _tick(tracker, T0 + 12 * STEP + 1, 66.0)
    # returns kept: 110/100, 99/110, 66/60 (the 99 -> 60 drop spans a gap)
    returns = [110 / 100 - 1, 99 / 110 - 1, 66 / 60 - 1]
    expected = (0.0 - statistics.mean(returns)) / statistics.stdev(returns)
    assert features.return_zscore == pytest.approx(expected)


def test_features_are_cached_until_something_changes() -> None:
    tracker = FeatureTracker()
    first = _tick(tracker, T0 + 1_000, 100.0)
    assert tracker.features("BTC/USDT") is first
    older = make_tick(open_ms=T0, event_ms=T0 + 500, c=1.0, low=0.5)
    tracker.on_tick(older)  # older than what it knows: ignored
    assert tracker.features("BTC/USDT") is first
    assert _tick(tracker, T0 + 2_000, 101.0) is not first


def test_the_aggregator_feeds_the_tracker_including_seeded_history() -> None:
    bus = EventBus()
    tracker = FeatureTracker()
    aggregator = MultiTFAggregator(bus, observers=[tracker])
    bus.subscribe(Topic.MARKET_TICK, aggregator.on_tick, name="aggregator")
    aggregator.seed("BTC/USDT", "15m", candle_series([100.0 + i for i in range(97)], start_ms=T0))
    bus.publish(
        make_tick(open_ms=T0 + 97 * STEP, event_ms=T0 + 97 * STEP + 60_000, c=250.0, h=260.0)
    )
    features = tracker.features("BTC/USDT")
    assert features is not None and features.change_24h_pct == pytest.approx(150.0)
    assert features.volume_ratio == pytest.approx(10.0 * 15 / 1.5 / 10.0)  # 10 in 90 s, mean 10


def test_bad_parameters_are_refused() -> None:
    with pytest.raises(ValueError):
        FeatureTracker(min_returns=1)
    with pytest.raises(ValueError):
        FeatureTracker(min_volumes=30, volume_window=20)


# --- brute-force reference ------------------------------------------------------------------


def _reference(candles: list[Candle], at_ms: int, price: float) -> dict[str, float | None]:
    by_open = {c.open_time_ms: c.close for c in candles}
    out: dict[str, float | None] = {}
    for name, hours in (("change_1h_pct", 1), ("change_4h_pct", 4), ("change_24h_pct", 24)):
        target = at_ms - hours * 3_600_000
        ref = by_open.get(target - target % STEP - STEP)
        out[name] = None if ref is None else (price / ref - 1) * 100
    returns = [
        b.close / a.close - 1
        for a, b in itertools.pairwise(candles)
        if b.open_time_ms == a.open_time_ms + STEP
    ][-96:]
    last = candles[-1]
    fresh = last.open_time_ms >= at_ms - at_ms % STEP - 2 * STEP
    if len(returns) >= 20 and fresh and statistics.stdev(returns) > 0:
        ret = price / last.close - 1
        out["return_zscore"] = (ret - statistics.mean(returns)) / statistics.stdev(returns)
    else:
        out["return_zscore"] = None
    return out


@settings(max_examples=examples(60), deadline=None)
@given(
    present=st.lists(st.booleans(), min_size=2, max_size=200),
    closes=st.lists(st.floats(min_value=1.0, max_value=1e5), min_size=200, max_size=200),
    into_ms=st.integers(0, 2 * STEP - 1),
    price=st.floats(min_value=1.0, max_value=1e5),
)
def test_incremental_features_match_a_brute_force_reference(
    present: list[bool], closes: list[float], into_ms: int, price: float
) -> None:
    present[-1] = True
    candles = [
        Candle(open_time_ms=T0 + i * STEP, open=c, high=c, low=c, close=c, volume=1.0)
        for i, (keep, c) in enumerate(zip(present, closes, strict=False))
        if keep
    ]
    tracker = FeatureTracker()
    _feed(tracker, candles)
    at_ms = candles[-1].open_time_ms + STEP + into_ms
    features = _tick(tracker, at_ms, price)
    expected = _reference(candles, at_ms, price)
    for name, value in expected.items():
        got = getattr(features, name)
        if value is None:
            assert got is None and name in features.unavailable
        else:
            assert got == pytest.approx(value, rel=1e-9, abs=1e-9)


def _uncached(tracker: FeatureTracker, ticker: str) -> TickFeatures:
    """The features made afresh from the tracker's state, bypassing its cache."""
    state = tracker._tickers[ticker]
    return tracker._compute(ticker, state)


@settings(max_examples=examples(60), deadline=None)
@given(
    steps=st.lists(
        st.tuples(
            st.integers(0, 3),  # instants forward (0: the same instant again)
            st.sampled_from(["15m", "1h", "4h"]),
            st.sampled_from([99.5, 100.0, 101.25]),  # few prices: repeats are common
            st.floats(0.0, 50.0),
            st.booleans(),  # a 15m close before the tick
        ),
        min_size=1,
        max_size=60,
    )
)
def test_cached_features_equal_fresh_ones_across_timeframes_of_an_instant(
    steps: list[tuple[int, Timeframe, float, float, bool]],
) -> None:
    """Every stream pushes at the same instant: another timeframe's update of the same instant
    and price keeps the cache, which must always equal features made afresh."""
    tracker = FeatureTracker()
    _feed(tracker, candle_series([100.0 + (i % 7) for i in range(100)], start_ms=T0))
    at_ms = T0 + 100 * STEP + 1_000
    for forward, timeframe, price, volume, close_first in steps:
        at_ms += forward * 75_000
        if close_first:
            open_ms = at_ms - at_ms % STEP - STEP
            tracker.on_close("BTC/USDT", "15m", candle_series([price], start_ms=open_ms)[0])
        step = TIMEFRAME_MS_BY_NAME[timeframe]
        tick = make_tick(
            timeframe=timeframe, open_ms=at_ms - at_ms % step, event_ms=at_ms, c=price, v=volume
        )
        tracker.on_tick(tick)
        assert tracker.features("BTC/USDT") == _uncached(tracker, "BTC/USDT")


TIMEFRAME_MS_BY_NAME: dict[Timeframe, int] = {"15m": STEP, "1h": 4 * STEP, "4h": 16 * STEP}


@settings(max_examples=examples(100), deadline=None)
@given(
    run=st.integers(90, 110),  # consecutive closes first: about the number kept
    events=st.lists(
        st.tuples(
            # candles forward from the newest close (<= 0: an older one), mostly the next
            st.sampled_from([1, 1, 1, 2, 3, 0, -1, -3]),
            st.booleans(),  # a correction of that candle instead of a close
            st.floats(min_value=1.0, max_value=1e5),
        ),
        max_size=60,
    ),
)
def test_the_closes_kept_are_the_newest_day_and_a_bit(
    run: int, events: list[tuple[int, bool, float]]
) -> None:
    """Dropping the first kept close must drop the oldest, whatever mix of closes, stale closes,
    gaps and corrections came (the brute force: every close ever taken, by open time)."""
    tracker = FeatureTracker()
    taken: dict[int, float] = {}
    newest = T0 - STEP
    for forward, correct, price in [(1, False, 100.0 + i) for i in range(run)] + events:
        open_ms = newest + forward * STEP
        candle = candle_series([price], start_ms=open_ms)[0]
        if correct:
            tracker.on_correct("BTC/USDT", "15m", candle)
            if open_ms in tracker._tickers["BTC/USDT"].closes:
                taken[open_ms] = price
        else:
            tracker.on_close("BTC/USDT", "15m", candle)
            if open_ms > newest:
                taken[open_ms] = price
                newest = open_ms
    newest_day = sorted(taken)[-tracker._keep_closes :]
    kept = tracker._tickers["BTC/USDT"].closes
    assert sorted(kept.items()) == [(t, taken[t]) for t in newest_day]


@pytest.mark.parametrize(
    "absurd",
    [
        [1e-300, 1e300, 1e-300],  # returns near 1e300: their squares overflow
        [1e300, math.inf, 1e300],  # an infinite close, then back: inf and -1 returns
        [math.inf, 1.0, math.inf],  # -1 then inf: a NaN return
    ],
)
def test_closes_past_floats_range_are_kept_and_the_zscore_says_why_it_is_missing(
    absurd: list[float],
) -> None:
    """Before, ``_mean_std`` raised inside ``on_close`` and left the ticker's state half
    updated: a close whose return overflowed did not count, nor did its volume."""
    tracker = FeatureTracker(return_window=30, min_returns=20)
    closes = [100.0 + i for i in range(25)] + absurd + [100.0] * 6
    _feed(tracker, candle_series(closes, start_ms=T0))
    features = _tick(tracker, T0 + len(closes) * STEP + 60_000, 101.0)
    assert features.return_zscore is None
    assert features.unavailable["return_zscore"] == "15m returns have no finite spread"
    assert features.change_1h_pct == pytest.approx(1.0)  # every close counted, the last 100.0
    # once the window has moved past them, the z-score is back
    _feed(
        tracker, candle_series([100.0 + i % 3 for i in range(40)], start_ms=T0 + len(closes) * STEP)
    )
    again = _tick(tracker, T0 + (len(closes) + 40) * STEP + 60_000, 101.0)
    assert again.return_zscore is not None and math.isfinite(again.return_zscore)
