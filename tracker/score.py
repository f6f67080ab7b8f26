"""The agent layer's fallback score, pure: five components in [-1, 1], weighted, then cut off.

Positive means "keep / add to the position", negative "get out". Positions are long-only, so the
entry direction is always up. The components:

- regime change (0.25): the volatility part of the regime label at entry vs now (``low`` 0,
  ``medium`` 1, ``high`` 2): ``(risk at entry - risk now) / 2``. Calmer than at entry is positive,
  wilder negative, unchanged 0; a label without a known volatility (``unknown``) gives 0: no
  information is not a signal.
- momentum reversal (0.25): the return over the recent safety-cycle prices (oldest to newest),
  in the entry direction: ``tanh(return_pct / momentum_scale_pct)``. Falling against a long is
  negative. Fewer than two prices: 0.
- correlation risk (0.20): how much this position moves together with the other tracked ones.
  All positions are long (the same direction), so what concentrates risk is co-movement: the
  Pearson correlation of this position's recent price returns with each other position's, over
  their common tail; the component is ``-mean(max(corr, 0))``, in [-1, 0]. Alone, or with fewer
  than three common returns, or a flat series: 0 (nothing known to move together).
- PnL trajectory (0.15): PnL now minus what was given back since the peak,
  ``(pnl - (peak - pnl)) / trajectory_scale_pct``, clipped. At a new peak it is ``pnl / scale``;
  a position that rose 8 % and is back at 2 % scores ``(2 - 6) / 5 = -0.8``.
- time decay (0.15): ``-min(holding_secs / time_horizon_secs, 1)``: a position that has not
  been exited ages towards the exit; 0 when just opened, -1 at the horizon (48 h).

Score < ``exit_below`` (-0.3) -> EXIT, > ``add_above`` (+0.4) -> ADD, else HOLD (strict: a score
exactly at a cut-off holds).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from tracker.config import TrackerConfig
from tracker.ports import ReviewAction

_VOLATILITY_RISK = {"low_volatility": 0, "medium_volatility": 1, "high_volatility": 2}
_MIN_CORRELATION_RETURNS = 3


class ScoreComponents(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    regime_change: float
    momentum_reversal: float
    correlation_risk: float
    pnl_trajectory: float
    time_decay: float


class FallbackScore(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    components: ScoreComponents
    score: float
    action: ReviewAction

    def summary(self) -> str:
        parts = ", ".join(f"{k} {v:+.2f}" for k, v in self.components.model_dump().items())
        return f"fallback score {self.score:+.3f} -> {self.action.value} ({parts})"


def _clip(value: float) -> float:
    return max(-1.0, min(1.0, value))


def volatility_risk(regime: str) -> int | None:
    """0/1/2 for a label naming low/medium/high volatility (e.g. ``high_volatility_goldilocks``)."""
    label = regime.lower()
    for name, risk in _VOLATILITY_RISK.items():
        if label.startswith(name):
            return risk
    return None


def regime_change_component(regime_at_entry: str, regime_now: str) -> float:
    before, now = volatility_risk(regime_at_entry), volatility_risk(regime_now)
    if before is None or now is None:
        return 0.0
    return (before - now) / 2.0


def momentum_component(prices: Sequence[float], scale_pct: float) -> float:
    if len(prices) < 2 or prices[0] <= 0:
        return 0.0
    return math.tanh((prices[-1] / prices[0] - 1.0) * 100.0 / scale_pct)


def _returns(prices: Sequence[float]) -> list[float]:
    return [b / a - 1.0 for a, b in itertools.pairwise(prices)]  # prices are > 0


def _pearson(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    if sxx <= 0.0 or syy <= 0.0:
        return None
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    return max(-1.0, min(1.0, sxy / math.sqrt(sxx * syy)))


def correlation_component(own: Sequence[float], others: Sequence[Sequence[float]]) -> float:
    own_returns = _returns(own)
    together: list[float] = []
    for other in others:
        other_returns = _returns(other)
        n = min(len(own_returns), len(other_returns))
        if n < _MIN_CORRELATION_RETURNS:
            continue
        corr = _pearson(own_returns[-n:], other_returns[-n:])
        if corr is not None:
            together.append(max(corr, 0.0))
    return -sum(together) / len(together) if together else 0.0


def trajectory_component(pnl_pct: float, peak_pnl_pct: float, scale_pct: float) -> float:
    given_back = max(peak_pnl_pct - pnl_pct, 0.0)
    return _clip((pnl_pct - given_back) / scale_pct)


def time_decay_component(holding_secs: float, horizon_secs: float) -> float:
    return -min(max(holding_secs, 0.0) / horizon_secs, 1.0)


def score_action(score: float, config: TrackerConfig) -> ReviewAction:
    if score < config.exit_below:
        return ReviewAction.EXIT
    if score > config.add_above:
        return ReviewAction.ADD
    return ReviewAction.HOLD


def fallback_score(
    *,
    regime_at_entry: str,
    regime_now: str,
    recent_prices: Sequence[float],
    other_recent_prices: Sequence[Sequence[float]],
    pnl_pct: float,
    peak_pnl_pct: float,
    holding_secs: float,
    config: TrackerConfig,
) -> FallbackScore:
    components = ScoreComponents(
        regime_change=regime_change_component(regime_at_entry, regime_now),
        momentum_reversal=momentum_component(recent_prices, config.momentum_scale_pct),
        correlation_risk=correlation_component(recent_prices, other_recent_prices),
        pnl_trajectory=trajectory_component(pnl_pct, peak_pnl_pct, config.trajectory_scale_pct),
        time_decay=time_decay_component(holding_secs, config.time_horizon_secs),
    )
    return score_from_components(components, config)


def score_from_components(components: ScoreComponents, config: TrackerConfig) -> FallbackScore:
    weights = config.weights.model_dump()
    score = sum(weights[name] * value for name, value in components.model_dump().items())
    return FallbackScore(components=components, score=score, action=score_action(score, config))
