"""The seed's Thompson-sampling arithmetic: how one closed trade moves one signal's Beta posterior.

For a signal value ``s`` (in [-1, 1]) and the trade's pnl as a FRACTION (``+5 %`` is ``0.05``):

- aligned when ``(s > 0 and pnl > 0) or (s < 0 and pnl < 0)``: the signal pointed the way the
  trade went;
- ``effective_pnl = +|pnl|`` when aligned, ``-|pnl|`` otherwise;
- ``reward = sigmoid(10 * effective_pnl)``, so aligned rewards are in [0.5, 1) and misaligned
  ones in (0, 0.5];
- the posterior is discounted first (``alpha *= d; beta *= d``), then
  ``alpha += reward`` when aligned, ``beta += 1 - reward`` when not.

Two edge cases the seed's formula leaves open, decided here:

- ``s == 0``: the signal did not vote, so it is neither aligned nor misaligned; ``outcome_for``
  returns ``None`` and its posterior is neither discounted nor credited (reading the formula
  literally would count an abstaining signal as wrong on every trade).
- ``pnl == 0``: the formula is applied literally. A flat trade is neither profitable nor a loss,
  so no signal is aligned; ``effective_pnl = 0``, ``reward = 0.5`` and ``beta += 0.5``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: the seed's reward steepness: reward = sigmoid(REWARD_STEEPNESS * effective_pnl)
REWARD_STEEPNESS = 10.0


def sigmoid(x: float) -> float:
    """The logistic function, written so a huge |x| never overflows ``math.exp``."""
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    z = math.exp(x)
    return z / (1.0 + z)


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one trade says about one signal."""

    aligned: bool
    effective_pnl: float  # a fraction, +|pnl| when aligned, -|pnl| otherwise
    reward: float  # sigmoid(REWARD_STEEPNESS * effective_pnl)


def outcome_for(signal: float, pnl_fraction: float) -> Outcome | None:
    """The seed's alignment and reward; ``None`` for a signal of exactly 0 (it did not vote)."""
    if not (math.isfinite(signal) and math.isfinite(pnl_fraction)):
        raise ValueError(f"signal and pnl must be finite, got {signal!r} and {pnl_fraction!r}")
    if signal == 0:
        return None
    aligned = (signal > 0 and pnl_fraction > 0) or (signal < 0 and pnl_fraction < 0)
    effective = abs(pnl_fraction) if aligned else -abs(pnl_fraction)
    return Outcome(aligned, effective, sigmoid(REWARD_STEEPNESS * effective))


@dataclass(frozen=True, slots=True)
class BetaPosterior:
    """Beta(alpha, beta) over "this signal points the right way", and how many trades shaped it."""

    alpha: float
    beta: float
    trades: int = 0

    @property
    def mean(self) -> float:
        return self.alpha / (self.alpha + self.beta)

    def updated(self, outcome: Outcome, discount: float) -> BetaPosterior:
        """Discount the old evidence, then credit this trade (the seed's order)."""
        alpha = self.alpha * discount
        beta = self.beta * discount
        if outcome.aligned:
            alpha += outcome.reward
        else:
            beta += 1.0 - outcome.reward
        return BetaPosterior(alpha, beta, self.trades + 1)
