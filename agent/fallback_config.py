"""Settings of the rule-based fallback pipeline (``agent.fallback``), with the documented tables.

Blend weights by crypto regime label (``RegimeBlendDetect``); each row sums to 1:

| regime            | rsi  | momentum | bollinger | why                                          |
|-------------------|------|----------|-----------|----------------------------------------------|
| low_volatility    | 0.25 | 0.50     | 0.25      | quiet markets trend: follow momentum         |
| medium_volatility | 0.30 | 0.40     | 0.30      | between the two                              |
| high_volatility   | 0.40 | 0.20     | 0.40      | violent markets overshoot: fade the extremes |
| unknown           | 1/3  | 1/3      | 1/3       | no view, no tilt                             |

A label outside this table is treated as ``unknown`` and the reasoning says so.

The derivatives signal, when present, takes ``derivatives_weight`` (0.20) of the blend and the three
technical signals share the rest in the table's proportions; when absent it is dropped (not a 0).

Re-check interval by the most volatile regime among the tickers (``next_check_secs``): high 300 s,
medium 900 s, unknown 900 s, low 1800 s. Volatile markets move further between checks.

Units: drawdown limits are in percent (6.0 = 6 %); position sizes are fractions of portfolio value,
like ``TradeDecision.position_pct`` (0.05 = 5 %).
"""

from __future__ import annotations

import math
from typing import Final, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

RegimeLabel = Literal["low_volatility", "medium_volatility", "high_volatility", "unknown"]
REGIME_LABELS: Final[tuple[RegimeLabel, ...]] = (
    "low_volatility",
    "medium_volatility",
    "high_volatility",
    "unknown",
)
#: the technical signals, in the order they are reported; also the learner's signal names
TECHNICAL_SIGNALS: Final = ("rsi", "momentum", "bollinger")
DERIVATIVES_SIGNAL: Final = "derivatives"


class SignalWeights(BaseModel):
    """Shares of the three technical signals in the blend (they sum to 1)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rsi: float = Field(ge=0.0, le=1.0)
    momentum: float = Field(ge=0.0, le=1.0)
    bollinger: float = Field(ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _sums_to_one(self) -> Self:
        total = self.rsi + self.momentum + self.bollinger
        if not math.isclose(total, 1.0, abs_tol=1e-9):
            raise ValueError(f"signal weights must sum to 1, got {total}")
        return self

    def as_dict(self) -> dict[str, float]:
        return {"rsi": self.rsi, "momentum": self.momentum, "bollinger": self.bollinger}


_THIRD: Final = 1.0 / 3.0
DEFAULT_BLEND_TABLE: Final[dict[RegimeLabel, SignalWeights]] = {
    "low_volatility": SignalWeights(rsi=0.25, momentum=0.50, bollinger=0.25),
    "medium_volatility": SignalWeights(rsi=0.30, momentum=0.40, bollinger=0.30),
    "high_volatility": SignalWeights(rsi=0.40, momentum=0.20, bollinger=0.40),
    "unknown": SignalWeights(rsi=_THIRD, momentum=_THIRD, bollinger=1.0 - 2 * _THIRD),
}
DEFAULT_NEXT_CHECK_SECS: Final[dict[RegimeLabel, int]] = {
    "high_volatility": 300,
    "medium_volatility": 900,
    "unknown": 900,
    "low_volatility": 1800,
}


class FallbackConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    timeframe: Literal["15m", "1h", "4h"] = "4h"  # of the candles the pipeline is given
    #: history whose newest candle closed more than this many candles before ``at_ms`` is stale
    stale_after_candles: int = Field(2, ge=1)

    # RSI signal: +1 at or below ``rsi_oversold``, -1 at or above ``rsi_overbought``, linear between
    rsi_window: int = Field(14, ge=2)
    rsi_oversold: float = Field(30.0, ge=0.0, le=100.0)
    rsi_overbought: float = Field(70.0, ge=0.0, le=100.0)
    # momentum signal: rate of change over ``momentum_window`` candles (6 x 4h = one day),
    # ±``momentum_full_scale_pct`` or beyond is ±1
    momentum_window: int = Field(6, ge=1)
    momentum_full_scale_pct: float = Field(5.0, gt=0.0)
    # Bollinger signal: 1 - 2 %B, clipped: +1 at the lower band, -1 at the upper band
    bollinger_window: int = Field(20, ge=2)
    bollinger_num_std: float = Field(2.0, gt=0.0)

    blend_table: dict[RegimeLabel, SignalWeights] = Field(
        default_factory=lambda: dict(DEFAULT_BLEND_TABLE)
    )
    derivatives_weight: float = Field(0.20, ge=0.0, lt=1.0)

    # entries: BUY at or above ``entry_score``; size grows from min to max with score and confidence
    entry_score: float = Field(0.30, gt=0.0, lt=1.0)
    min_position_pct: float = Field(0.05, gt=0.0, le=0.20)
    max_position_pct: float = Field(0.20, gt=0.0, le=0.20)  # the risk layer's cap is 0.20 too

    # soft exits, tighter than the tracker's hard -10 % stop and 12 % trailing stop
    stop_loss_pct: float = Field(6.0, gt=0.0, lt=100.0)
    trailing_stop_pct: float = Field(8.0, gt=0.0, lt=100.0)
    exit_score: float = Field(-0.40, gt=-1.0, lt=0.0)

    next_check_secs: dict[RegimeLabel, int] = Field(
        default_factory=lambda: dict(DEFAULT_NEXT_CHECK_SECS)
    )

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.rsi_oversold >= self.rsi_overbought:
            raise ValueError("rsi_oversold must be below rsi_overbought")
        if self.min_position_pct > self.max_position_pct:
            raise ValueError("min_position_pct must not exceed max_position_pct")
        for name, table in (
            ("blend_table", self.blend_table),
            ("next_check_secs", self.next_check_secs),
        ):
            missing = [label for label in REGIME_LABELS if label not in table]
            if missing:
                raise ValueError(f"{name} lacks regime labels {missing}")
        return self
