"""The seed's Thompson-sampling arithmetic, checked against posteriors worked out by hand."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from learner.online import OnlineLearner
from learner.thompson import BetaPosterior, outcome_for, sigmoid

# sigmoid values used below, sigmoid(x) = 1 / (1 + e^-x)
S_P05 = 0.6224593312018546  # sigmoid(+0.5)
S_M05 = 0.3775406687981454  # sigmoid(-0.5)
S_P02 = 0.5498339973124780  # sigmoid(+0.2)
S_M02 = 0.4501660026875222  # sigmoid(-0.2)
S_P10 = 0.7310585786300049  # sigmoid(+1.0)
S_M10 = 0.2689414213699951  # sigmoid(-1.0)


def test_sigmoid_constants_are_what_the_hand_computation_uses() -> None:
    for x, expected in [(0.5, S_P05), (-0.5, S_M05), (0.2, S_P02), (-0.2, S_M02), (1.0, S_P10)]:
        assert sigmoid(x) == pytest.approx(expected, abs=1e-15)
    assert sigmoid(-1.0) == pytest.approx(S_M10, abs=1e-15)


def test_sigmoid_does_not_overflow_on_huge_inputs() -> None:
    assert sigmoid(1e6) == 1.0
    assert sigmoid(-1e6) == 0.0


def entry(learner: OnlineLearner, regime: str | None = None) -> dict[str, tuple[float, float, int]]:
    signals = learner.posteriors(regime)["signals"]
    return {name: (p["alpha"], p["beta"], p["trades"]) for name, p in signals.items()}


def assert_posterior(got: tuple[float, float, int], alpha: float, beta: float, trades: int) -> None:
    assert got[0] == pytest.approx(alpha, abs=1e-12)
    assert got[1] == pytest.approx(beta, abs=1e-12)
    assert got[2] == trades


def test_four_updates_match_hand_computed_posteriors() -> None:
    """Prior Beta(1, 1), discount 0.95; pnl_pct is percent, the formula's pnl a fraction."""
    learner = OnlineLearner(None)

    # Trade 1: +5 % -> pnl 0.05.
    #  rsi +0.6: aligned, reward = sigmoid(10 * 0.05) = S_P05
    #    alpha = 1 * 0.95 + 0.6224593312 = 1.5724593312, beta = 1 * 0.95 = 0.95
    #  momentum -0.4: misaligned, effective -0.05, reward = S_M05, beta += 1 - S_M05
    #    alpha = 0.95, beta = 0.95 + 0.6224593312 = 1.5724593312
    learner.update({"rsi": 0.6, "momentum": -0.4}, 5.0, "bull", "BTC/USDT", 1, 60.0)
    got = entry(learner)
    assert_posterior(got["rsi"], 1.5724593312018547, 0.95, 1)
    assert_posterior(got["momentum"], 0.95, 1.5724593312018547, 1)

    # Trade 2: -2 % -> pnl -0.02.
    #  rsi +0.3 on a loss: misaligned, reward = sigmoid(-0.2) = S_M02, beta += 1 - S_M02
    #    alpha = 1.5724593312 * 0.95 = 1.4938363646
    #    beta  = 0.95 * 0.95 + 0.5498339973 = 0.9025 + 0.5498339973 = 1.4523339973
    #  momentum -0.7 on a loss: aligned, reward = sigmoid(0.2) = S_P02
    #    alpha = 0.9025 + 0.5498339973 = 1.4523339973, beta = 1.5724593312 * 0.95 = 1.4938363646
    learner.update({"rsi": 0.3, "momentum": -0.7}, -2.0, "bull", "ETH/USDT", 2, 60.0)
    got = entry(learner)
    assert_posterior(got["rsi"], 1.4938363646417618, 1.4523339973124778, 2)
    assert_posterior(got["momentum"], 1.4523339973124778, 1.4938363646417618, 2)

    # Trade 3: +10 % -> pnl 0.1.
    #  rsi 0.0: did not vote, untouched (no discount either)
    #  momentum +0.5: aligned, reward = sigmoid(1.0) = S_P10
    #    alpha = 1.4523339973 * 0.95 + 0.7310585786 = 1.3797172975 + 0.7310585786 = 2.1107758761
    #    beta  = 1.4938363646 * 0.95 = 1.4191445464
    #  bollinger -0.2 (new, from the prior): misaligned, reward = S_M10, beta += 1 - S_M10
    #    alpha = 0.95, beta = 0.95 + 0.7310585786 = 1.6810585786
    learner.update(
        {"rsi": 0.0, "momentum": 0.5, "bollinger": -0.2}, 10.0, "bull", "SOL/USDT", 3, 60.0
    )
    got = entry(learner)
    assert_posterior(got["rsi"], 1.4938363646417618, 1.4523339973124778, 2)
    assert_posterior(got["momentum"], 2.110775876076859, 1.4191445464096737, 3)
    assert_posterior(got["bollinger"], 0.95, 1.681058578630005, 1)

    # Trade 4: exactly 0 % (flat). Neither profitable nor a loss, so rsi +0.5 is misaligned with
    # effective pnl 0, reward = sigmoid(0) = 0.5, beta += 0.5
    #    alpha = 1.4938363646 * 0.95 = 1.4191445464
    #    beta  = 1.4523339973 * 0.95 + 0.5 = 1.3797172975 + 0.5 = 1.8797172975
    learner.update({"rsi": 0.5}, 0.0, "bull", "BTC/USDT", 4, 60.0)
    got = entry(learner)
    assert_posterior(got["rsi"], 1.4191445464096737, 1.879717297446854, 3)
    assert_posterior(got["momentum"], 2.110775876076859, 1.4191445464096737, 3)

    # All four trades were in "bull", so that regime's table is the same arithmetic, and with
    # 4 >= 3 trades it is the one in force.
    view = learner.posteriors("bull")
    assert view["in_force"] == "regime"
    assert entry(learner, "bull") == entry(learner)
    momentum = view["signals"]["momentum"]
    assert momentum["mean"] == pytest.approx(
        2.110775876076859 / (2.110775876076859 + 1.4191445464096737)
    )


def test_outcome_signs_and_rewards() -> None:
    # (signal, pnl fraction) -> (aligned, reward)
    assert outcome_for(0.6, 0.05) is not None
    cases = [
        (0.6, 0.05, True, S_P05),
        (-0.4, 0.05, False, S_M05),
        (0.3, -0.02, False, S_M02),
        (-0.7, -0.02, True, S_P02),
        (0.5, 0.0, False, 0.5),
        (-0.5, 0.0, False, 0.5),
    ]
    for signal, pnl, aligned, reward in cases:
        outcome = outcome_for(signal, pnl)
        assert outcome is not None
        assert outcome.aligned is aligned
        assert outcome.reward == pytest.approx(reward, abs=1e-15)
    assert outcome_for(0.0, 0.05) is None
    assert outcome_for(-0.0, -0.05) is None


@pytest.mark.parametrize("bad", [(math.nan, 0.01), (0.5, math.inf), (0.5, math.nan)])
def test_outcome_rejects_non_finite_inputs(bad: tuple[float, float]) -> None:
    with pytest.raises(ValueError, match="finite"):
        outcome_for(*bad)


def test_discount_compounds_as_a_geometric_series() -> None:
    """Always aligned with reward r from Beta(1, 1): alpha_n = 0.95^n + r (1 - 0.95^n) / 0.05,
    beta_n = 0.95^n. After 30 trades of +5 %: 0.95^30 = 0.2146387639."""
    posterior = BetaPosterior(1.0, 1.0)
    outcome = outcome_for(1.0, 0.05)
    assert outcome is not None
    for _ in range(30):
        posterior = posterior.updated(outcome, 0.95)
    decay = 0.95**30
    assert decay == pytest.approx(0.2146387639, abs=1e-10)
    assert posterior.beta == pytest.approx(decay, abs=1e-12)
    assert posterior.alpha == pytest.approx(decay + S_P05 * (1 - decay) / 0.05, abs=1e-12)
    assert posterior.trades == 30


def test_discount_applies_only_to_the_signals_that_voted() -> None:
    learner = OnlineLearner(None)
    learner.update({"rsi": 1.0, "momentum": 1.0}, 5.0, None, "BTC/USDT", 1, 1.0)
    before = entry(learner)["momentum"]
    # momentum absent, then momentum exactly 0: neither trade touches it
    learner.update({"rsi": 1.0}, 5.0, None, "BTC/USDT", 2, 1.0)
    learner.update({"rsi": 1.0, "momentum": 0.0}, 5.0, None, "BTC/USDT", 3, 1.0)
    after = entry(learner)
    assert after["momentum"] == before
    assert after["rsi"][2] == 3


@given(
    signal=st.floats(-1, 1, allow_nan=False),
    pnl=st.floats(-5, 5, allow_nan=False),
    alpha=st.floats(0.01, 100),
    beta=st.floats(0.01, 100),
)
def test_an_update_moves_exactly_one_side_by_at_most_one(
    signal: float, pnl: float, alpha: float, beta: float
) -> None:
    outcome = outcome_for(signal, pnl)
    if outcome is None:
        assert signal == 0
        return
    new = BetaPosterior(alpha, beta).updated(outcome, 0.95)
    added_alpha = new.alpha - alpha * 0.95
    added_beta = new.beta - beta * 0.95
    if outcome.aligned:
        assert added_beta == 0
        assert 0.5 - 1e-12 <= added_alpha <= 1 + 1e-12
    else:
        assert added_alpha == 0
        assert 0.5 - 1e-12 <= added_beta <= 1 + 1e-12
