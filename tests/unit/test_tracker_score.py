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


btc_changes = st.one_of(st.none(), st.floats(min_value=-100.0, max_value=1000.0))
holdings = st.floats(min_value=0, max_value=1e8)


@given(regimes, regimes, prices, btc_changes, st.booleans(), pcts, pcts, holdings)
def test_every_component_is_in_minus_one_to_one(
    before: str,
    now: str,
    own: list[float],
    btc: float | None,
    is_btc: bool,
    pnl: float,
    peak: float,
    holding: float,
) -> None:
    scored = fallback_score(
        regime_at_entry=before,
        regime_now=now,
        recent_prices=own,
        btc_change_1h_pct=btc,
        is_btc=is_btc,
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


def _correlation(btc: float | None, is_btc: bool = False) -> float:
    return correlation_component(btc, is_btc, CONFIG.btc_crash_pct, CONFIG.btc_crash_score)


def test_a_btc_crash_scores_every_altcoin_position_as_the_design_says() -> None:
    assert _correlation(-5.0) == pytest.approx(-0.9)  # the design's example: BTC -5 % in 1 h
    assert _correlation(-2.5) == pytest.approx(-0.45)
    assert _correlation(-10.0) == -1.0
    assert _correlation(0.0) == 0.0
    assert _correlation(3.0) == 0.0  # BTC rising is no crash risk
    assert _correlation(None) == 0.0  # unknown: no signal
    assert _correlation(-5.0, is_btc=True) == 0.0  # BTC's own fall is the momentum term's


@given(btc_changes, btc_changes)
def test_correlation_risk_is_bounded_and_never_better_when_btc_falls_more(
    a: float | None, b: float | None
) -> None:
    for change in (a, b):
        assert -1.0 <= _correlation(change) <= 0.0
        assert _correlation(change, is_btc=True) == 0.0
    if a is not None and b is not None and a <= b:
        assert _correlation(a) <= _correlation(b)


@given(regimes, prices, pcts, holdings, st.floats(min_value=-100.0, max_value=-5.0))
def test_a_btc_crash_alone_weighs_on_a_single_altcoin_position(
    regime: str, own: list[float], pnl: float, holding: float, btc: float
) -> None:
    """Held alone (nothing to correlate with), an altcoin still pays for BTC's crash: the score
    is lower than with BTC flat by the term's weight times at least 0.9."""
    common = {
        "regime_at_entry": regime,
        "regime_now": regime,
        "recent_prices": own,
        "is_btc": False,
        "pnl_pct": pnl,
        "peak_pnl_pct": pnl,
        "holding_secs": holding,
        "config": CONFIG,
    }
    crashed = fallback_score(btc_change_1h_pct=btc, **common)  # type: ignore[arg-type]
    flat = fallback_score(btc_change_1h_pct=0.0, **common)  # type: ignore[arg-type]
    assert crashed.components.correlation_risk <= -0.9
    gap = flat.score - crashed.score
    assert gap >= CONFIG.weights.correlation_risk * 0.9 - 1e-12


def test_pnl_trajectory_is_pnl_minus_what_was_given_back() -> None:
    assert trajectory_component(5.0, 5.0, 5.0) == 1.0
    assert trajectory_component(2.0, 8.0, 5.0) == pytest.approx(-0.8)
    assert trajectory_component(0.0, 0.0, 5.0) == 0.0
    assert trajectory_component(-20.0, 0.0, 5.0) == -1.0


def _decay(holding_secs: float, pnl_pct: float) -> float:
    return time_decay_component(
        holding_secs,
        pnl_pct,
        CONFIG.time_decay_after_secs,
        CONFIG.time_horizon_secs,
        CONFIG.time_decay_max_pnl_pct,
    )


def test_time_decay_ages_only_long_holds_with_a_low_profit() -> None:
    hour = 3600.0
    assert _decay(0.0, 0.0) == 0.0
    assert _decay(24 * hour, 0.5) == 0.0  # not a long hold yet
    assert _decay(36 * hour, 0.5) == pytest.approx(-0.5)
    assert _decay(48 * hour, -3.0) == -1.0
    assert _decay(100 * hour, 1.99) == -1.0
    assert _decay(100 * hour, 2.0) == 0.0  # a winner is never pushed out by age alone
    assert _decay(100 * hour, 15.0) == 0.0


@given(holdings, pcts)
def test_time_decay_is_bounded_and_zero_for_winners_and_short_holds(
    holding: float, pnl: float
) -> None:
    value = _decay(holding, pnl)
    assert -1.0 <= value <= 0.0
    if pnl >= CONFIG.time_decay_max_pnl_pct or holding <= CONFIG.time_decay_after_secs:
        assert value == 0.0


@given(holdings, holdings, st.floats(min_value=-100.0, max_value=1.99))
def test_time_decay_never_improves_with_age(a: float, b: float, pnl: float) -> None:
    younger, older = sorted((a, b))
    assert _decay(older, pnl) <= _decay(younger, pnl)


@given(regimes, prices, st.floats(min_value=2.0, max_value=1000.0), holdings)
def test_a_winner_scores_the_same_however_long_it_is_held(
    regime: str, own: list[float], pnl: float, holding: float
) -> None:
    def scored(secs: float) -> float:
        return fallback_score(
            regime_at_entry=regime,
            regime_now=regime,
            recent_prices=own,
            btc_change_1h_pct=None,
            is_btc=False,
            pnl_pct=pnl,
            peak_pnl_pct=pnl,
            holding_secs=secs,
            config=CONFIG,
        ).score

    assert scored(holding) == scored(0.0)


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
        btc_change_1h_pct=-1.0,
        is_btc=False,
        pnl_pct=-5.0,
        peak_pnl_pct=3.0,
        holding_secs=30 * 3600.0,
        config=CONFIG,
    )
    assert scored.action is ReviewAction.EXIT
    assert scored.score < -0.3


def test_a_fresh_winner_in_a_calmer_regime_scores_add() -> None:
    scored = fallback_score(
        regime_at_entry="high_volatility_goldilocks",
        regime_now="low_volatility_goldilocks",
        recent_prices=[100.0, 101.0, 102.0, 103.0],
        btc_change_1h_pct=0.5,
        is_btc=False,
        pnl_pct=5.0,
        peak_pnl_pct=5.0,
        holding_secs=600.0,
        config=CONFIG,
    )
    assert scored.action is ReviewAction.ADD
    assert "ADD" in scored.summary()


@given(
    unit,
    unit,
    unit,
    unit,
    unit,
    st.lists(st.floats(min_value=0.0, max_value=2.0), min_size=5, max_size=5),
)
def test_the_score_and_summary_read_the_fields_as_their_dumps_do(
    regime: float,
    momentum: float,
    correlation: float,
    trajectory: float,
    decay: float,
    weights: list[float],
) -> None:
    """The score sums the fields one by one in field order: the same float as summing the dumps
    (the order changes the last bit), and the summary shows them in that order."""
    components = ScoreComponents(
        regime_change=regime,
        momentum_reversal=momentum,
        correlation_risk=correlation,
        pnl_trajectory=trajectory,
        time_decay=decay,
    )
    config = TrackerConfig(weights=dict(zip(ScoreComponents.model_fields, weights, strict=True)))
    dumped = config.weights.model_dump()
    expected = sum(dumped[name] * value for name, value in components.model_dump().items())
    scored = score_from_components(components, config)
    assert scored.score == expected  # exactly: not approx
    shown = ", ".join(f"{k} {v:+.2f}" for k, v in components.model_dump().items())
    assert scored.summary() == f"fallback score {expected:+.3f} -> {scored.action.value} ({shown})"
