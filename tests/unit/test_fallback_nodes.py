"""Each fallback node on hand-made inputs with hand-computed outputs."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from pydantic import ValidationError
from test_fallback_support import bare_blend, open_position

from agent.fallback_config import DEFAULT_BLEND_TABLE, FallbackConfig, SignalWeights
from agent.fallback_nodes import (
    DerivativesReading,
    DerivativesSignalInput,
    RegimeBlendDetect,
    RegimeBlendEntry,
    RegimeBlendExit,
    RegimeBlendSignal,
)
from agent.fallback_technical import bollinger_signal, momentum_signal, rsi_signal

CONFIG = FallbackConfig()
NO_DERIVATIVES = DerivativesReading(value=None, weight=0.0, unavailable_reason="not polled")
#: small windows so every indicator can be worked out by hand on six closes
SMALL = FallbackConfig(rsi_window=3, momentum_window=2, bollinger_window=4)
SIX_CLOSES = (10.0, 11.0, 10.5, 11.5, 11.0, 12.0)
# on SIX_CLOSES with SMALL:
#   RSI(3) = 100 - 100 / 4.4 = 77.27 -> (50 - 77.27) / 20 = -1.36 -> clipped to -1
#   ROC(2) = 12 / 11.5 - 1 = 4.3478 % -> / 5 % = +0.869565
#   bands over 10.5 11.5 11 12: mean 11.25, population std sqrt(0.3125) = 0.559017,
#   %B = (12 - 10.131966) / 2.236068 = 0.835410 -> 1 - 2 %B = -0.670820
RSI_SIGNAL, MOMENTUM_SIGNAL, BOLLINGER_SIGNAL = -1.0, 10.0 / 11.5, 1.0 - 2.0 * 0.8354101966249685


def test_signal_formulas() -> None:
    assert rsi_signal(30.0, 30.0, 70.0) == 1.0
    assert rsi_signal(70.0, 30.0, 70.0) == -1.0
    assert rsi_signal(50.0, 30.0, 70.0) == 0.0
    assert rsi_signal(40.0, 30.0, 70.0) == 0.5
    assert rsi_signal(5.0, 30.0, 70.0) == 1.0  # clipped
    assert rsi_signal(35.0, 20.0, 80.0) == 0.5  # mid 50, half-width 30
    assert momentum_signal(2.5, 5.0) == 0.5
    assert momentum_signal(-12.0, 5.0) == -1.0
    assert bollinger_signal(0.0) == 1.0
    assert bollinger_signal(0.25) == 0.5
    assert bollinger_signal(0.5) == 0.0
    assert bollinger_signal(1.3) == -1.0


def test_detect_maps_each_label_to_its_row() -> None:
    detect = RegimeBlendDetect(CONFIG)
    low = detect.run("low_volatility")
    assert low.regime == "low_volatility"
    assert low.weights == {"rsi": 0.25, "momentum": 0.50, "bollinger": 0.25}
    assert low.note == ""
    high = detect.run("high_volatility")
    assert high.weights == {"rsi": 0.40, "momentum": 0.20, "bollinger": 0.40}
    assert detect.run("medium_volatility").weights["momentum"] == 0.40
    unknown = detect.run("unknown")
    assert unknown.weights == pytest.approx({"rsi": 1 / 3, "momentum": 1 / 3, "bollinger": 1 / 3})
    odd = detect.run("bull_market")
    assert odd.regime == "unknown"
    assert odd.weights == unknown.weights
    assert "bull_market" in odd.note


def test_blend_table_rows_must_sum_to_one() -> None:
    with pytest.raises(ValidationError, match="sum to 1"):
        SignalWeights(rsi=0.5, momentum=0.5, bollinger=0.5)
    with pytest.raises(ValidationError, match="lacks regime labels"):
        FallbackConfig(blend_table={"unknown": DEFAULT_BLEND_TABLE["unknown"]})
    with pytest.raises(ValidationError, match="oversold"):
        FallbackConfig(rsi_oversold=70.0, rsi_overbought=30.0)


def test_derivatives_input_present_or_dropped_with_the_reason() -> None:
    node = DerivativesSignalInput(CONFIG)
    present = node.run(-0.4)
    assert present.value == -0.4
    assert present.weight == 0.20
    absent = node.run(None, "open interest not recorded")
    assert absent.value is None
    assert absent.weight == 0.0
    assert absent.unavailable_reason == "open interest not recorded"
    assert node.run(None).unavailable_reason == "no derivatives signal in the snapshot"


def test_signal_blend_by_hand() -> None:
    node = RegimeBlendSignal(SMALL)
    blend = RegimeBlendDetect(SMALL).run("medium_volatility")  # 0.3 / 0.4 / 0.3
    out = node.run(SIX_CLOSES, blend, NO_DERIVATIVES)
    assert out.signals == pytest.approx(
        {"rsi": RSI_SIGNAL, "momentum": MOMENTUM_SIGNAL, "bollinger": BOLLINGER_SIGNAL},
        rel=1e-12,
    )
    assert out.indicators["rsi"] == pytest.approx(100.0 - 100.0 / 4.4, rel=1e-12)
    assert out.indicators["rate_of_change_pct"] == pytest.approx(0.5 / 11.5 * 100, rel=1e-12)
    assert out.weights == pytest.approx({"rsi": 0.3, "momentum": 0.4, "bollinger": 0.3})
    score = 0.3 * RSI_SIGNAL + 0.4 * MOMENTUM_SIGNAL + 0.3 * BOLLINGER_SIGNAL
    spread = 0.3 * abs(RSI_SIGNAL) + 0.4 * abs(MOMENTUM_SIGNAL) + 0.3 * abs(BOLLINGER_SIGNAL)
    assert out.score == pytest.approx(score, rel=1e-12)  # -0.1534
    assert out.confidence == pytest.approx(abs(score) / spread, rel=1e-12)  # coverage 1
    assert out.unavailable == {"derivatives": "not polled"}
    assert "RSI 77.3" in out.summary
    assert "derivatives unavailable: not polled" in out.summary


def test_signal_blend_with_derivatives_takes_its_fixed_share() -> None:
    node = RegimeBlendSignal(SMALL)
    blend = RegimeBlendDetect(SMALL).run("medium_volatility")
    derivatives = DerivativesSignalInput(SMALL).run(0.5)
    out = node.run(SIX_CLOSES, blend, derivatives)
    assert out.weights == pytest.approx(
        {"rsi": 0.24, "momentum": 0.32, "bollinger": 0.24, "derivatives": 0.2}
    )
    technical = 0.3 * RSI_SIGNAL + 0.4 * MOMENTUM_SIGNAL + 0.3 * BOLLINGER_SIGNAL
    assert out.score == pytest.approx(0.8 * technical + 0.2 * 0.5, rel=1e-12)
    assert out.signals["derivatives"] == 0.5
    assert "derivatives" not in out.unavailable


def test_signals_without_enough_data_drop_out_and_the_rest_renormalise() -> None:
    node = RegimeBlendSignal(CONFIG)  # rsi needs 15 closes, momentum 7, bollinger 20
    blend = RegimeBlendDetect(CONFIG).run("medium_volatility")
    closes = tuple(100.0 + i for i in range(16))
    out = node.run(closes, blend, NO_DERIVATIVES)
    assert set(out.signals) == {"rsi", "momentum"}
    assert out.unavailable["bollinger"] == "needs 20 closes, have 16"
    assert out.weights == pytest.approx({"rsi": 0.3 / 0.7, "momentum": 0.4 / 0.7})
    # RSI 100 -> -1; ROC over 6 = 115 / 109 - 1 = 5.5 % -> +1: they cancel
    assert out.signals["rsi"] == -1.0
    assert out.signals["momentum"] == 1.0
    assert out.score == pytest.approx(0.3 / 0.7 * -1 + 0.4 / 0.7, rel=1e-12)
    assert out.confidence == pytest.approx(0.7 * (0.1 / 0.7), rel=1e-12)  # coverage 0.7


def test_no_candles_means_no_score_and_says_why() -> None:
    node = RegimeBlendSignal(CONFIG)
    blend = RegimeBlendDetect(CONFIG).run("low_volatility")
    out = node.run((), blend, NO_DERIVATIVES)
    assert out.score is None
    assert out.confidence == 0.0
    assert out.signals == {}
    assert out.unavailable == {
        "rsi": "needs 15 closes, have 0",
        "momentum": "needs 7 closes, have 0",
        "bollinger": "needs 20 closes, have 0",
        "derivatives": "not polled",
    }
    assert out.summary.startswith("no technical signal")
    stale = node.run((1.0,) * 40, blend, NO_DERIVATIVES, history_unavailable="stale history")
    assert stale.score is None
    assert stale.unavailable["rsi"] == "stale history"


def test_derivatives_alone_do_not_make_a_score() -> None:
    node = RegimeBlendSignal(CONFIG)
    blend = RegimeBlendDetect(CONFIG).run("unknown")
    out = node.run((), blend, DerivativesSignalInput(CONFIG).run(0.9))
    assert out.score is None
    assert out.signals == {}


def test_flat_window_drops_bollinger_only() -> None:
    node = RegimeBlendSignal(CONFIG)
    blend = RegimeBlendDetect(CONFIG).run("high_volatility")
    out = node.run((50.0,) * 30, blend, NO_DERIVATIVES)
    assert out.unavailable["bollinger"] == "flat window: the bands have no width"
    assert out.signals == {"rsi": 0.0, "momentum": 0.0}
    assert out.score == 0.0
    assert out.confidence == 0.0


# --- exits ------------------------------------------------------------------------------------


def test_exit_rules_by_hand() -> None:
    node = RegimeBlendExit(CONFIG)  # stop 6 %, trailing 8 %, exit score -0.40
    position = open_position("BTC/USDT", entry_price=100.0, peak_price=120.0)
    stop = node.run(position, 93.0, score=0.5)
    assert (stop.exit, stop.rule) == (True, "stop_loss")
    assert stop.drawdown_pct == pytest.approx(7.0)
    assert "loss 7.00 % >= stop 6.0 %" in stop.summary
    trailing = node.run(position, 110.0, score=0.5)
    assert (trailing.exit, trailing.rule) == (True, "trailing_stop")
    assert trailing.trailing_drawdown_pct == pytest.approx(100.0 / 12.0)
    signal = node.run(position, 115.0, score=-0.4)
    assert (signal.exit, signal.rule) == (True, "signal")
    assert "score -0.40 <= exit -0.40" in signal.summary
    calm = node.run(position, 115.0, score=-0.39)
    assert (calm.exit, calm.rule) == (False, "none")
    assert "within limits" in calm.summary
    no_score = node.run(position, 115.0, score=None)
    assert not no_score.exit
    assert "score n/a" in no_score.summary


def test_a_new_high_is_its_own_peak() -> None:
    node = RegimeBlendExit(CONFIG)
    position = open_position("BTC/USDT", entry_price=100.0, peak_price=105.0)
    verdict = node.run(position, 130.0, score=0.0)
    assert verdict.trailing_drawdown_pct == 0.0
    assert verdict.drawdown_pct == pytest.approx(-30.0)
    assert not verdict.exit


@given(
    loss_pct=st.floats(min_value=0.0, max_value=60.0),
    entry=st.floats(min_value=0.01, max_value=1e6),
)
def test_stop_loss_fires_exactly_from_the_documented_threshold(
    loss_pct: float, entry: float
) -> None:
    assume(abs(loss_pct - CONFIG.stop_loss_pct) > 1e-6)
    position = open_position("ETH/USDT", entry_price=entry, peak_price=entry)
    price = entry * (1.0 - loss_pct / 100.0)
    assume(price > 0)
    verdict = RegimeBlendExit(CONFIG).run(position, price, score=0.0)
    stopped = loss_pct > CONFIG.stop_loss_pct
    # from a peak at entry the trailing stop measures the same fall, and is wider: never first
    assert verdict.exit == stopped
    assert verdict.rule == ("stop_loss" if stopped else "none")


@given(
    fall_pct=st.floats(min_value=0.0, max_value=30.0),
    gain_pct=st.floats(min_value=10.0, max_value=200.0),
)
def test_trailing_stop_fires_exactly_from_the_documented_threshold(
    fall_pct: float, gain_pct: float
) -> None:
    assume(abs(fall_pct - CONFIG.trailing_stop_pct) > 1e-6)
    entry = 100.0
    peak = entry * (1.0 + gain_pct / 100.0)
    price = peak * (1.0 - fall_pct / 100.0)
    assume(price > entry * (1.0 - CONFIG.stop_loss_pct / 100.0) + 1e-6)  # stop loss not in play
    verdict = RegimeBlendExit(CONFIG).run(open_position("SOL/USDT", entry, peak), price, score=0.0)
    assert verdict.exit == (fall_pct > CONFIG.trailing_stop_pct)
    assert verdict.trailing_drawdown_pct == pytest.approx(fall_pct, abs=1e-9)


# --- entries ----------------------------------------------------------------------------------


def test_entry_sizing_by_hand() -> None:
    node = RegimeBlendEntry(CONFIG)  # entry 0.30, sizes 0.05..0.20
    at_threshold = node.run(bare_blend(0.30, 1.0), exposure=1.0, cash_fraction=1.0)
    assert at_threshold.buy
    assert at_threshold.position_pct == pytest.approx(0.05)
    full = node.run(bare_blend(1.0, 1.0), exposure=1.0, cash_fraction=1.0)
    assert full.position_pct == pytest.approx(0.20)
    # strength (0.65 - 0.3) / 0.7 = 0.5; raw 0.05 + 0.15 x 0.5 x 0.5 = 0.0875; x 0.8 = 0.07
    mid = node.run(bare_blend(0.65, 0.5), exposure=0.8, cash_fraction=1.0)
    assert mid.buy
    assert mid.position_pct == pytest.approx(0.07)
    assert "0.0875" not in mid.summary  # rounded to 3 decimals in the text
    assert "= 0.088, x exposure 0.80" in mid.summary
    cash_capped = node.run(bare_blend(1.0, 1.0), exposure=1.0, cash_fraction=0.06)
    assert cash_capped.position_pct == pytest.approx(0.06)


def test_no_entry_below_threshold_or_minimum_size() -> None:
    node = RegimeBlendEntry(CONFIG)
    below = node.run(bare_blend(0.29, 1.0), exposure=1.0, cash_fraction=1.0)
    assert not below.buy
    assert below.position_pct == 0.0
    assert "score +0.29 below entry +0.30" in below.summary
    # 0.0875 x 0.5 = 0.04375 < 0.05: too small to trade
    shrunk = node.run(bare_blend(0.65, 0.5), exposure=0.5, cash_fraction=1.0)
    assert not shrunk.buy
    assert "< minimum 0.05" in shrunk.summary
    broke = node.run(bare_blend(1.0, 1.0), exposure=1.0, cash_fraction=0.01)
    assert not broke.buy
    assert not node.run(bare_blend(None, 0.0), exposure=1.0, cash_fraction=1.0).buy


@given(
    score=st.floats(min_value=-1.0, max_value=1.0),
    confidence=st.floats(min_value=0.0, max_value=1.0),
    exposure=st.floats(min_value=0.0, max_value=2.0),
    cash_fraction=st.floats(min_value=0.0, max_value=1.0),
)
def test_entry_sizes_stay_in_bounds(
    score: float, confidence: float, exposure: float, cash_fraction: float
) -> None:
    node = RegimeBlendEntry(CONFIG)
    verdict = node.run(bare_blend(score, confidence), exposure, cash_fraction)
    if verdict.buy:
        assert score >= CONFIG.entry_score
        assert 0.05 <= verdict.position_pct <= 0.20
        assert verdict.position_pct <= cash_fraction
        stronger = node.run(bare_blend(min(1.0, score + 0.1), confidence), exposure, cash_fraction)
        assert stronger.buy
        assert stronger.position_pct >= verdict.position_pct
    else:
        assert verdict.position_pct == 0.0
    assert math.isfinite(verdict.position_pct)
    assert verdict.summary


def test_signal_node_outputs_stay_in_range_on_random_walks() -> None:
    rng = np.random.default_rng(7)
    node = RegimeBlendSignal(CONFIG)
    derivatives = DerivativesSignalInput(CONFIG)
    for label in ("low_volatility", "medium_volatility", "high_volatility", "unknown"):
        blend = RegimeBlendDetect(CONFIG).run(label)
        for _ in range(25):
            closes = tuple(100.0 * np.exp(np.cumsum(rng.normal(0, 0.03, 120))))
            out = node.run(closes, blend, derivatives.run(float(rng.uniform(-1, 1))))
            assert out.score is not None
            assert -1.0 <= out.score <= 1.0
            assert 0.0 <= out.confidence <= 1.0
            assert sum(out.weights.values()) == pytest.approx(1.0)
            assert all(-1.0 <= value <= 1.0 for value in out.signals.values())


def test_a_series_seen_again_gives_the_same_blend_and_callers_cannot_spoil_it() -> None:
    """The technical signals of a closes series are kept (decisions between two closes read the
    same series): the second reading equals the first and a fresh node's."""
    node = RegimeBlendSignal(CONFIG)
    blend = RegimeBlendDetect(CONFIG).run("medium_volatility")
    closes = tuple(100.0 + math.sin(i / 3.0) * 4 for i in range(60))
    first = node.run(closes, blend, NO_DERIVATIVES)
    first.unavailable["rsi"] = "spoiled by a caller"
    first.signals.clear()
    again = node.run(tuple(closes), blend, NO_DERIVATIVES)
    fresh = RegimeBlendSignal(CONFIG).run(closes, blend, NO_DERIVATIVES)
    assert again == fresh
    assert again.signals and "rsi" not in again.unavailable
    moved = node.run((*closes[1:], 101.0), blend, NO_DERIVATIVES)
    assert moved == RegimeBlendSignal(CONFIG).run((*closes[1:], 101.0), blend, NO_DERIVATIVES)
