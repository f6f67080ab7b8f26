"""``TrackerConfig``: the position tracker's thresholds and cadences (frozen)."""

from __future__ import annotations

import math
from typing import Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from market.timeframes import QUOTE


class ScoreWeights(BaseModel):
    """Weights of the fallback score's components (the issue's 0.25/0.25/0.20/0.15/0.15)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    regime_change: float = Field(0.25, ge=0.0)
    momentum_reversal: float = Field(0.25, ge=0.0)
    correlation_risk: float = Field(0.20, ge=0.0)
    pnl_trajectory: float = Field(0.15, ge=0.0)
    time_decay: float = Field(0.15, ge=0.0)


class TrackerConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    # --- cadence: one loop; the agent layer runs on every n-th safety cycle
    safety_interval_secs: float = Field(30.0, gt=0.0)
    agent_interval_secs: float = Field(180.0, gt=0.0)

    # --- safety layer (percent, of the entry price)
    stop_loss_pct: float = Field(-10.0, lt=0.0)
    trailing_arm_pct: float = Field(8.0, gt=0.0)
    trailing_stop_pct: float = Field(12.0, gt=0.0, lt=100.0)

    # --- agent layer: ADD sizing. The routine's risk caps are not on this path, so the tracker
    # applies the same 20 % max position itself (and never spends more than the free cash).
    add_pct: float = Field(0.05, gt=0.0, le=1.0)  # fraction of portfolio value per ADD
    max_position_pct: float = Field(0.20, gt=0.0, le=1.0)
    min_order_usd: float = Field(10.0, gt=0.0)  # smaller ADDs are skipped (exchange min notional)
    # the broker takes its fee on top of the notional: an ADD may use cash / (1 + this) at most
    fee_reserve_pct: float = Field(0.1, ge=0.0, lt=100.0)
    review_timeout_secs: float = Field(60.0, gt=0.0)

    # --- fallback score: weights, cut-offs and the scales of its components
    weights: ScoreWeights = ScoreWeights()
    exit_below: float = -0.3
    add_above: float = 0.4
    momentum_samples: int = Field(10, ge=2)  # safety-cycle prices kept per ticker (5 min at 30 s)
    momentum_scale_pct: float = Field(2.0, gt=0.0)  # a 2 % move over the window is ~tanh(1)
    trajectory_scale_pct: float = Field(5.0, gt=0.0)
    # correlation risk: BTC down ``btc_crash_pct`` in 1 h scores -``btc_crash_score`` for altcoins
    #: BASE/USDT in capitals, as market.tickers: a typo (BTCUSDT, btc/usdt) matched no ticker's
    #: features, and the altcoins' correlation risk was off without a word
    btc_ticker: str = Field("BTC/USDT", pattern=rf"^[A-Z0-9]+/{QUOTE}$")
    btc_crash_pct: float = Field(5.0, gt=0.0)
    btc_crash_score: float = Field(0.9, gt=0.0, le=1.0)
    # time decay: only holds past ``time_decay_after_secs`` with pnl below ``time_decay_max_pnl_pct``
    time_decay_after_secs: float = Field(24 * 3600.0, ge=0.0)
    time_horizon_secs: float = Field(48 * 3600.0, gt=0.0)
    time_decay_max_pnl_pct: float = 2.0

    # --- failures of the loop itself (broker down...): capped, jittered backoff
    retry_base_secs: float = Field(1.0, gt=0.0)
    retry_cap_secs: float = Field(30.0, gt=0.0)
    retry_jitter_fraction: float = Field(0.5, ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _agent_layer_on_safety_cycles(self) -> Self:
        ratio = self.agent_interval_secs / self.safety_interval_secs
        # an infinite interval made round() raise OverflowError, a traceback out of the settings
        if not math.isfinite(ratio) or ratio < 1 or abs(ratio - round(ratio)) > 1e-9:
            raise ValueError(
                "agent_interval_secs must be a whole multiple of safety_interval_secs "
                f"(got {self.agent_interval_secs} and {self.safety_interval_secs})"
            )
        if self.time_decay_after_secs >= self.time_horizon_secs:
            raise ValueError("time_decay_after_secs must be below time_horizon_secs")
        if self.exit_below >= self.add_above:
            raise ValueError("exit_below must be below add_above")
        return self

    @property
    def agent_every_cycles(self) -> int:
        """The agent layer runs on every n-th safety cycle (6 with the defaults)."""
        return round(self.agent_interval_secs / self.safety_interval_secs)
