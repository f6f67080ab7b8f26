"""The fallback score: each component's formula and range, the weights, the cut-offs."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracker.config import TrackerConfig
from tracker.ports import ReviewAction
from tracker.score import (
    ScoreComponents,
    correlation_component,
    fallback_score,
    momentum_component,
    regime_change_component,
    score_action,
    score_from_components,
    time_decay_component,
    trajectory_component,
)

CONFIG = TrackerConfig()
prices = st.lists(st.floats(min_value=1e-3, max_value=1e6), min_size=0, max_size=12)
pcts = st.floats(min_value=-100.0, max_value=1000.0)
unit = st.floats(min_value=-1.0, max_value=1.0)
regimes = st.sampled_from(
    ["low_volatility_goldilocks", "medium_volatility_reflation", "high_volatility", "unknown", ""]
)


@given(
    regimes,
    regimes,
    prices,
    st.lists(prices, max_size=3),
    pcts,
    pcts,
    st.floats(min_value=0, max_value=1e8),
)
def test_every_component_is_in_minus_one_to_one(
    before: str,
    now: str,
    own: list[float],
    others: list[list[float]],
    pnl: float,
    peak: float,
    holding: float,
) -> None:
    scored = fallback_score(
        regime_at_entry=before,
        regime_now=now,
        recent_prices=own,
        other_recent_prices=others,
        pnl_pct=pnl,
        peak_pnl_pct=max(pnl, peak),
        holding_secs=holding,
        config=CONFIG,
    )
    for name, value in scored.components.model_dump().items():
        assert -1.0 <= value <= 1.0, name
    assert -1.0 <= scored.score <= 1.0
    assert scored.action is score_action(scored.score, CONFIG)


def test_regime_change_compares_volatility_at_entry_and_now() -> None:
    assert regime_change_component("low_volatility_goldilocks", "high_volatility_goldilocks") == -1
    assert regime_change_component("low_volatility_x", "medium_volatility_y") == -0.5
    assert regime_change_component("high_volatility", "low_volatility") == 1.0
    assert regime_change_component("medium_volatility_a", "medium_volatility_b") == 0.0
    assert regime_change_component("unknown", "high_volatility") == 0.0  # no information


def test_momentum_is_the_windows_return_in_the_long_direction() -> None:
    assert momentum_component([100.0, 101.0, 102.0], 2.0) == pytest.approx(math.tanh(1.0))
    assert momentum_component([100.0, 99.0, 98.0], 2.0) == pytest.approx(-math.tanh(1.0))
    assert momentum_component([100.0], 2.0) == 0.0
    assert momentum_component([], 2.0) == 0.0


def test_correlation_risk_is_minus_the_mean_positive_correlation_with_the_others() -> None:
    own = [100.0, 101.0, 100.5, 102.0, 101.0]
    twin = [p * 30 for p in own]  # moves exactly together
    mirror = [200.0 - p for p in own]  # moves exactly against
    assert correlation_component(own, [twin]) == pytest.approx(-1.0)
    assert correlation_component(own, [mirror]) == 0.0
    assert correlation_component(own, [twin, mirror]) == pytest.approx(-0.5)
    assert correlation_component(own, []) == 0.0  # alone
    assert correlation_component(own[:3], [twin[:3]]) == 0.0  # two returns: too few to say
    assert correlation_component(own, [[5.0] * 5]) == 0.0  # a flat series moves with nothing


def test_pnl_trajectory_is_pnl_minus_what_was_given_back() -> None:
    assert trajectory_component(5.0, 5.0, 5.0) == 1.0
    assert trajectory_component(2.0, 8.0, 5.0) == pytest.approx(-0.8)
    assert trajectory_component(0.0, 0.0, 5.0) == 0.0
    assert trajectory_component(-20.0, 0.0, 5.0) == -1.0


def test_time_decay_goes_from_zero_to_minus_one_at_the_horizon() -> None:
    assert time_decay_component(0.0, 3600.0) == 0.0
    assert time_decay_component(1800.0, 3600.0) == -0.5
    assert time_decay_component(10 * 3600.0, 3600.0) == -1.0


def test_the_score_is_the_issues_weighted_sum() -> None:
    components = ScoreComponents(
        regime_change=1.0,
        momentum_reversal=-1.0,
        correlation_risk=-0.5,
        pnl_trajectory=0.2,
        time_decay=-0.4,
    )
    expected = 0.25 * 1.0 + 0.25 * -1.0 + 0.20 * -0.5 + 0.15 * 0.2 + 0.15 * -0.4
    assert score_from_components(components, CONFIG).score == pytest.approx(expected)


@given(unit)
def test_cut_offs_are_strict(score: float) -> None:
    action = score_action(score, CONFIG)
    if score < -0.3:
        assert action is ReviewAction.EXIT
    elif score > 0.4:
        assert action is ReviewAction.ADD
    else:
        assert action is ReviewAction.HOLD


def test_cut_offs_at_their_exact_values() -> None:
    assert score_action(-0.3, CONFIG) is ReviewAction.HOLD
    assert score_action(math.nextafter(-0.3, -1.0), CONFIG) is ReviewAction.EXIT
    assert score_action(0.4, CONFIG) is ReviewAction.HOLD
    assert score_action(math.nextafter(0.4, 1.0), CONFIG) is ReviewAction.ADD


def test_a_position_going_wrong_in_a_wilder_regime_scores_exit() -> None:
    scored = fallback_score(
        regime_at_entry="low_volatility_goldilocks",
        regime_now="high_volatility_goldilocks",
        recent_prices=[100.0, 98.0, 96.0, 95.0],
        other_recent_prices=[[50.0, 49.0, 48.0, 47.0]],
        pnl_pct=-5.0,
        peak_pnl_pct=3.0,
        holding_secs=24 * 3600.0,
        config=CONFIG,
    )
    assert scored.action is ReviewAction.EXIT
    assert scored.score < -0.3


def test_a_fresh_winner_in_a_calmer_regime_scores_add() -> None:
    scored = fallback_score(
        regime_at_entry="high_volatility_goldilocks",
        regime_now="low_volatility_goldilocks",
        recent_prices=[100.0, 101.0, 102.0, 103.0],
        other_recent_prices=[],
        pnl_pct=5.0,
        peak_pnl_pct=5.0,
        holding_secs=600.0,
        config=CONFIG,
    )
    assert scored.action is ReviewAction.ADD
    assert "ADD" in scored.summary()
