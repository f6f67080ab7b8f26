"""The safety layer's rules at their exact thresholds: stop loss -10 %, arming at +8 % peak,
trailing stop 12 % below the trailing high."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracker.config import TrackerConfig
from tracker.safety import ExitReason, safety_verdict

CONFIG = TrackerConfig()
# multiples of 100: every threshold price (x0.90, x1.08, x0.88 of x1.25) is an exact float
entries = st.integers(min_value=1, max_value=10**9).map(lambda m: 100.0 * m)
wide_entries = st.floats(min_value=1e-6, max_value=1e9, allow_nan=False, allow_infinity=False)
margins = st.floats(min_value=1e-9, max_value=0.5)


def up(x: float) -> float:
    return math.nextafter(x, math.inf)


def down(x: float) -> float:
    return math.nextafter(x, -math.inf)


@given(entries)
def test_stop_loss_fires_at_exactly_minus_10_pct_and_not_one_ulp_above(entry: float) -> None:
    at_stop = 90.0 * (entry / 100.0)  # an exact float: entry is a multiple of 100
    verdict = safety_verdict(entry, at_stop, entry, False, CONFIG)
    assert verdict.exit is ExitReason.STOP_LOSS
    assert verdict.pnl_pct == pytest.approx(-10.0)
    assert safety_verdict(entry, up(at_stop), entry, False, CONFIG).exit is None


@given(wide_entries, margins)
def test_stop_loss_by_any_margin_around_minus_10_pct(entry: float, margin: float) -> None:
    below = entry * (0.9 - margin)
    above = entry * (0.9 + margin)
    if below > 0:
        assert safety_verdict(entry, below, entry, False, CONFIG).exit is ExitReason.STOP_LOSS
    assert safety_verdict(entry, above, entry, False, CONFIG).exit is None


@given(entries)
def test_trailing_stop_arms_at_exactly_8_pct_peak(entry: float) -> None:
    arm_price = 108.0 * (entry / 100.0)
    assert safety_verdict(entry, arm_price, entry, False, CONFIG).armed
    assert not safety_verdict(entry, down(arm_price), entry, False, CONFIG).armed
    # a peak recorded earlier (the trailing high) arms it too, whatever the price is now
    assert safety_verdict(entry, entry, arm_price, False, CONFIG).armed


@given(wide_entries, margins)
def test_arming_by_any_margin_around_8_pct(entry: float, margin: float) -> None:
    assert safety_verdict(entry, entry * (1.08 + margin), entry, False, CONFIG).armed
    assert not safety_verdict(entry, entry * (1.08 - margin), entry, False, CONFIG).armed


@given(entries)
def test_trailing_stop_fires_at_exactly_12_pct_below_the_high(entry: float) -> None:
    high = 125.0 * (entry / 100.0)
    stop = 110.0 * (entry / 100.0)  # 125 x 0.88
    verdict = safety_verdict(entry, stop, high, True, CONFIG)
    assert verdict.exit is ExitReason.TRAILING_STOP
    assert verdict.trailing_stop_price == stop
    assert safety_verdict(entry, up(stop), high, True, CONFIG).exit is None


@given(wide_entries, st.floats(min_value=1.08, max_value=5.0), margins)
def test_trailing_stop_by_any_margin_around_12_pct(
    entry: float, peak_ratio: float, margin: float
) -> None:
    high = entry * peak_ratio * (1 + 1e-12)  # safely at or above the arming level
    below = high * (0.88 - margin)
    above = high * (0.88 + margin)
    fired = safety_verdict(entry, below, high, False, CONFIG).exit
    assert fired in (ExitReason.TRAILING_STOP, ExitReason.STOP_LOSS)
    if below > entry * 0.9 * (1 + 1e-9):
        assert fired is ExitReason.TRAILING_STOP
    if above < high:
        assert safety_verdict(entry, above, high, False, CONFIG).exit is None


@given(wide_entries, st.floats(min_value=1.03, max_value=1.0799))
def test_trailing_stop_never_fires_before_it_arms(entry: float, peak_ratio: float) -> None:
    high = entry * peak_ratio
    price = high * 0.8799  # past the 12 % trailing stop, above the -10 % stop loss
    verdict = safety_verdict(entry, price, high, False, CONFIG)
    assert not verdict.armed  # the peak never reached +8 %
    assert verdict.exit is None
    assert verdict.trailing_stop_price is None


def test_armed_stays_armed_when_the_price_falls_back_below_the_arming_level() -> None:
    verdict = safety_verdict(100.0, 101.0, 109.0, True, CONFIG)
    assert verdict.armed and verdict.exit is None
    assert verdict.trailing_high == 109.0
    assert verdict.trailing_stop_price == pytest.approx(109.0 * 0.88)


def test_the_trailing_high_follows_new_highs_only() -> None:
    assert safety_verdict(100.0, 104.0, 102.0, False, CONFIG).trailing_high == 104.0
    assert safety_verdict(100.0, 101.0, 102.0, False, CONFIG).trailing_high == 102.0
    assert safety_verdict(100.0, 95.0, 100.0, False, CONFIG).peak_pnl_pct == 0.0


def test_a_gap_through_both_levels_is_named_stop_loss() -> None:
    verdict = safety_verdict(100.0, 85.0, 120.0, True, CONFIG)
    assert verdict.exit is ExitReason.STOP_LOSS
    assert verdict.pnl_pct == pytest.approx(-15.0)


def test_thresholds_follow_the_config() -> None:
    config = TrackerConfig(stop_loss_pct=-5.0, trailing_arm_pct=3.0, trailing_stop_pct=2.5)
    assert safety_verdict(100.0, 95.0, 100.0, False, config).exit is ExitReason.STOP_LOSS
    assert safety_verdict(100.0, 103.0, 100.0, False, config).armed
    trailing = safety_verdict(100.0, 97.5, 100.0, True, config)  # 100 x 0.975
    assert trailing.exit is ExitReason.TRAILING_STOP


def test_prices_must_be_positive() -> None:
    with pytest.raises(ValueError):
        safety_verdict(0.0, 1.0, 1.0, False, CONFIG)
    with pytest.raises(ValueError):
        safety_verdict(1.0, -1.0, 1.0, False, CONFIG)
