"""The learner acts in the rule-based decider: the Thompson draw re-weights the blend within
[0.5x, 1.5x] per signal, the reasoning says when that changed an action, and without a draw
(``--no-memory``, nothing learned yet) the decision is the fixed blend's, byte for byte."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_fallback_support import TICKERS, ticker_at, utc_ms

from agent.decision import TradeDecision
from agent.fallback import FallbackPipeline
from agent.fallback_decider import learned_draw
from agent.fallback_inputs import FallbackInputs, TickerInputs
from agent.fallback_score import learned_weights
from agent.snapshot import MarketSnapshot
from broker.port import Action

NAMES = ("rsi", "momentum", "bollinger", "derivatives")
unit = st.floats(0.0, 1.0, allow_nan=False)


@st.composite
def blends(draw: st.DrawFn) -> dict[str, float]:
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, unique=True))
    raw = {name: draw(st.floats(0.01, 1.0)) for name in names}
    total = sum(raw.values())
    return {name: value / total for name, value in raw.items()}


@given(blends(), st.dictionaries(st.sampled_from((*NAMES, "funding")), unit))
def test_learned_weights_are_bounded_and_renormalised(
    weights: dict[str, float], draws: dict[str, float]
) -> None:
    out, multipliers = learned_weights(weights, draws)
    assert set(out) == set(weights)
    assert math.isclose(sum(out.values()), 1.0, rel_tol=1e-9)
    assert set(multipliers) == set(weights) & set(draws)  # a signal not in the blend: ignored
    for name, factor in multipliers.items():
        assert 0.5 <= factor <= 1.5
        assert factor == pytest.approx(0.5 + draws[name])
    # before renormalising each weight moved by its factor, so the ratios are the factors' ratios
    for a in out:
        for b in out:
            expected = weights[a] * multipliers.get(a, 1.0) / (weights[b] * multipliers.get(b, 1.0))
            assert out[a] / out[b] == pytest.approx(expected, rel=1e-9)


@given(blends())
def test_the_prior_mean_draw_or_no_draw_leaves_the_blend_alone(weights: dict[str, float]) -> None:
    assert learned_weights(weights, {}) == (weights, {})
    neutral, _ = learned_weights(weights, dict.fromkeys(weights, 0.5))
    assert neutral == pytest.approx(weights)


def _inputs(at_ms: int, draw: dict[str, float]) -> FallbackInputs:
    tickers = tuple(ticker_at(t, at_ms).model_copy(update={"learned_draw": draw}) for t in TICKERS)
    return FallbackInputs(at_ms=at_ms, tickers=tickers, portfolio_value=1e4, cash=1e4)


def _moved_instant() -> tuple[int, dict[str, float]]:
    """The first 4h close of March 2025 where a draw that trusts the signals pointing up and
    distrusts the others turns a fixed-blend HOLD into a BUY for some ticker."""
    pipeline = FallbackPipeline()
    for at_ms in range(utc_ms(2025, 3, 1), utc_ms(2025, 4, 1), 4 * 3_600_000):
        fixed = pipeline.decide(_inputs(at_ms, {}))
        for decision in fixed.decisions:
            if decision.action != Action.HOLD:
                continue
            draw = {n: 1.0 if v > 0 else 0.0 for n, v in decision.signal_weights.items()}
            learned = pipeline.decide(_inputs(at_ms, draw))
            if any(d.action == Action.BUY for d in learned.decisions):
                return at_ms, draw
    raise AssertionError("no instant in March 2025 where the learned weights move a decision")


def _by_ticker(decisions: tuple[TradeDecision, ...]) -> dict[str, TradeDecision]:
    return {d.ticker: d for d in decisions}


def test_a_draw_can_move_a_decision_and_the_reasoning_says_so() -> None:
    at_ms, draw = _moved_instant()
    pipeline = FallbackPipeline()
    fixed = _by_ticker(pipeline.decide(_inputs(at_ms, {})).decisions)
    learned = _by_ticker(pipeline.decide(_inputs(at_ms, draw)).decisions)
    moved = [t for t in TICKERS if learned[t].action != fixed[t].action]
    assert moved
    for ticker in TICKERS:
        said = "The learner moved this decision" in learned[ticker].reasoning
        assert said == (ticker in moved), learned[ticker].reasoning
        assert "learned weights:" in learned[ticker].reasoning or not learned[ticker].signal_weights
    ticker = moved[0]
    assert f"it would be {fixed[ticker].action.value}" in learned[ticker].reasoning


def test_without_a_draw_the_decision_is_the_fixed_blends() -> None:
    at_ms = utc_ms(2025, 3, 10, 8)
    plain = FallbackPipeline().decide(_inputs(at_ms, {}))
    assert all("learned" not in d.reasoning for d in plain.decisions)
    assert plain == FallbackPipeline().decide(
        FallbackInputs(
            at_ms=at_ms,
            tickers=tuple(ticker_at(t, at_ms) for t in TICKERS),
            portfolio_value=1e4,
            cash=1e4,
        )
    )


def test_the_draw_comes_from_the_snapshot_and_no_learner_means_none() -> None:
    base = {
        "at_ms": 0,
        "tickers": {},
        "btc_price": None,
        "btc_change_1h_pct": None,
        "btc_change_24h_pct": None,
        "regime": None,
        "exposure_scale": 1.0,
        "open_positions": [],
        "portfolio_value": None,
        "cash": None,
        "gate_wake_reasons": [],
    }
    without = MarketSnapshot.model_validate({**base, "unavailable": {"ts_posteriors": "off"}})
    assert learned_draw(without, "BTC/USDT") == {}
    posteriors = {
        "draw_seed": "42:d1-1",
        "tickers": {
            "BTC/USDT": {
                "in_force": "regime",
                "signals": {"rsi": {"mean": 0.6, "draw": 0.71}, "momentum": {"draw": 0.2}},
            }
        },
    }
    snap = MarketSnapshot.model_validate({**base, "ts_posteriors": posteriors})
    assert learned_draw(snap, "BTC/USDT") == {"rsi": 0.71, "momentum": 0.2}
    assert learned_draw(snap, "ETH/USDT") == {}


def test_draws_outside_the_unit_interval_are_refused() -> None:
    with pytest.raises(ValueError, match="learned draws"):
        TickerInputs(ticker="BTC/USDT", learned_draw={"rsi": 1.2})
