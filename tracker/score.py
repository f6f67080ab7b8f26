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
- correlation risk (0.20): an altcoin falls with BTC, so a BTC crash is a risk to every altcoin
  position, held alone or not. From BTC's change over the last hour:
  ``max(-1, crash_score x min(btc_change_1h_pct, 0) / crash_pct)``, in [-1, 0]: the design's
  example, BTC -5 % in 1 h, scores -0.9 (``btc_crash_pct`` 5, ``btc_crash_score`` 0.9) and
  anything from -5.6 % scores -1. BTC rising, a BTC position itself (its own fall is the momentum
  term's) or BTC's change unknown: 0.
- PnL trajectory (0.15): PnL now minus what was given back since the peak,
  ``(pnl - (peak - pnl)) / trajectory_scale_pct``, clipped. At a new peak it is ``pnl / scale``;
  a position that rose 8 % and is back at 2 % scores ``(2 - 6) / 5 = -0.8``.
- time decay (0.15): only a long hold with a low profit ages towards the exit, never a winner:
  with ``pnl_pct < time_decay_max_pnl_pct`` (2 %) it falls linearly from 0 at
  ``time_decay_after_secs`` (24 h) to -1 at ``time_horizon_secs`` (48 h); a position in profit
  by 2 % or more, or held less than 24 h, scores 0.

Score < ``exit_below`` (-0.3) -> EXIT, > ``add_above`` (+0.4) -> ADD, else HOLD (strict: a score
exactly at a cut-off holds).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache

from pydantic import BaseModel, ConfigDict

from core.unvalidated import require_plain, unvalidated
from tracker.config import TrackerConfig
from tracker.ports import ReviewAction

_VOLATILITY_RISK = {"low_volatility": 0, "medium_volatility": 1, "high_volatility": 2}


class ScoreComponents(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    regime_change: float
    momentum_reversal: float
    correlation_risk: float
    pnl_trajectory: float
    time_decay: float


#: the components in field order (the order the score sums them and the summary shows them)
_COMPONENTS = tuple(ScoreComponents.model_fields)


class FallbackScore(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    components: ScoreComponents
    score: float
    action: ReviewAction

    def summary(self) -> str:
        components = self.components
        parts = ", ".join(f"{name} {getattr(components, name):+.2f}" for name in _COMPONENTS)
        return f"fallback score {self.score:+.3f} -> {self.action.value} ({parts})"


require_plain(ScoreComponents, frozenset(_COMPONENTS))
_COMPONENT_NAMES = set(_COMPONENTS)
_SCORE_NAMES = {"components", "score", "action"}
require_plain(FallbackScore, frozenset(_SCORE_NAMES))


def _clip(value: float) -> float:
    return max(-1.0, min(1.0, value))


@lru_cache(maxsize=256)
def volatility_risk(regime: str) -> int | None:
    """0/1/2 for a label naming low/medium/high volatility (e.g. ``high_volatility_goldilocks``).
    Cached: the labels are a handful, asked twice per position every agent cycle."""
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


def correlation_component(
    btc_change_1h_pct: float | None, is_btc: bool, crash_pct: float, crash_score: float
) -> float:
    if is_btc or btc_change_1h_pct is None or not math.isfinite(btc_change_1h_pct):
        return 0.0
    return max(-1.0, crash_score * min(btc_change_1h_pct, 0.0) / crash_pct)


def trajectory_component(pnl_pct: float, peak_pnl_pct: float, scale_pct: float) -> float:
    given_back = max(peak_pnl_pct - pnl_pct, 0.0)
    return _clip((pnl_pct - given_back) / scale_pct)


def time_decay_component(
    holding_secs: float, pnl_pct: float, after_secs: float, horizon_secs: float, max_pnl_pct: float
) -> float:
    if pnl_pct >= max_pnl_pct or holding_secs <= after_secs:
        return 0.0
    return -min((holding_secs - after_secs) / (horizon_secs - after_secs), 1.0)


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
    btc_change_1h_pct: float | None,
    is_btc: bool,
    pnl_pct: float,
    peak_pnl_pct: float,
    holding_secs: float,
    config: TrackerConfig,
) -> FallbackScore:
    values = {
        "regime_change": regime_change_component(regime_at_entry, regime_now),
        "momentum_reversal": momentum_component(recent_prices, config.momentum_scale_pct),
        "correlation_risk": correlation_component(
            btc_change_1h_pct, is_btc, config.btc_crash_pct, config.btc_crash_score
        ),
        "pnl_trajectory": trajectory_component(pnl_pct, peak_pnl_pct, config.trajectory_scale_pct),
        "time_decay": time_decay_component(
            holding_secs,
            pnl_pct,
            config.time_decay_after_secs,
            config.time_horizon_secs,
            config.time_decay_max_pnl_pct,
        ),
    }
    # floats as validation would leave them (an int from an odd input is validated): the agent
    # layer scores every open position every cycle
    if all(type(v) is float for v in values.values()):
        components = unvalidated(ScoreComponents, values, _COMPONENT_NAMES)
    else:
        components = ScoreComponents(**values)
    return score_from_components(components, config)


def score_from_components(components: ScoreComponents, config: TrackerConfig) -> FallbackScore:
    # the fields read one by one: two model_dumps were most of a review's score (a review of
    # every open position every agent cycle)
    weights = config.weights
    score = sum(getattr(weights, name) * getattr(components, name) for name in _COMPONENTS)
    fields = {"components": components, "score": score, "action": score_action(score, config)}
    if type(score) is float and type(components) is ScoreComponents:
        return unvalidated(FallbackScore, fields, _SCORE_NAMES)
    return FallbackScore(**fields)
