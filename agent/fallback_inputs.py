"""What the rule-based fallback decider reads: each ticker's closes, price, regime, derivatives
reading, open position and learner draw (``TickerInputs``), and the portfolio around them
(``FallbackInputs``). Validated once: a closes tuple shared between candle closes is checked once.
"""

from __future__ import annotations

from typing import Any, Self

import numpy as np
import pandas as pd
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_validator,
)

from agent.fallback_nodes import OpenPosition
from agent.memo import IdentityMemo
from market.closes import CloseSeries

#: closes series remembered at once (tickers, with and without learner)
SERIES_KEPT = 16
#: closes tuple given -> its validated form
_validated_closes: IdentityMemo[tuple[Any, ...], tuple[float, ...]] = IdentityMemo(SERIES_KEPT)


class TickerInputs(BaseModel):
    """One ticker as the fallback sees it. ``closes`` are CLOSED candles of the configured
    timeframe, oldest first; ``last_candle_open_ms`` is the newest one's open time."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ticker: str = Field(min_length=1)
    closes: tuple[float, ...] = ()
    last_candle_open_ms: int | None = None
    price: float | None = Field(None, gt=0.0)  # None: no current price in the snapshot
    regime_label: str = "unknown"
    regime_exposure: float = Field(1.0, ge=0.0)
    derivatives_signal: float | None = Field(None, ge=-1.0, le=1.0)
    derivatives_unavailable_reason: str = ""
    position: OpenPosition | None = None
    #: the learner's Thompson draw per signal, each in [0, 1] (empty: the fixed blend)
    learned_draw: dict[str, float] = Field(default_factory=dict)

    @field_validator("learned_draw")
    @classmethod
    def _unit_draws(cls, draws: dict[str, float]) -> dict[str, float]:
        bad = {name: value for name, value in draws.items() if not 0.0 <= value <= 1.0}
        if bad:
            raise ValueError(f"learned draws must be in [0, 1], got {bad}")
        return draws

    @field_validator("closes")
    @classmethod
    def _positive_finite(cls, closes: tuple[float, ...]) -> tuple[float, ...]:
        array = np.asarray(closes, dtype=np.float64)
        if not (np.isfinite(array).all() and (array > 0).all()):
            raise ValueError("closes must be finite and positive")
        return closes

    @field_validator("closes", mode="wrap")
    @classmethod
    def _validated_once(cls, closes: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        """The same tuple object again (``market.closes`` shares one between candle closes, for
        every decision in between) gets the same validated tuple back: checking its few hundred
        floats once is enough, and the technical signals then find the series by identity."""
        if not isinstance(closes, tuple):  # a list could change in place: not remembered
            return handler(closes)
        known = _validated_closes.get(closes)
        if known is None:
            known = handler(closes)
            _validated_closes.put(closes, known)
        return known

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.closes and self.last_candle_open_ms is None:
            raise ValueError("closes given without last_candle_open_ms")
        if self.position is not None and self.position.detail.ticker != self.ticker:
            raise ValueError(
                f"position for {self.position.detail.ticker} given with ticker {self.ticker}"
            )
        if self.position is not None and self.position.detail.entry_price <= 0:
            raise ValueError("position entry_price must be positive")
        return self

    @classmethod
    def from_frame(cls, ticker: str, frame: pd.DataFrame, **fields: object) -> TickerInputs:
        """From a ``market.recorded``-shaped frame (index ``open_time_ms``, closed candles)."""
        return cls.from_series(ticker, CloseSeries.from_frame(frame), **fields)

    @classmethod
    def from_series(cls, ticker: str, series: CloseSeries, **fields: object) -> TickerInputs:
        """From a history source's closes (``market.closes``: shared between closes, no copy)."""
        return cls.model_validate(
            {
                "ticker": ticker,
                "closes": series.closes,
                "last_candle_open_ms": series.last_open_ms,
                **fields,
            }
        )


class FallbackInputs(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    at_ms: int = Field(ge=0)
    tickers: tuple[TickerInputs, ...]
    portfolio_value: float = Field(ge=0.0)
    cash: float = Field(ge=0.0)
    exposure_scale: float = Field(1.0, ge=0.0)  # the combined regime's, applied to every ticker


__all__ = ["SERIES_KEPT", "FallbackInputs", "TickerInputs"]
