"""What the snapshot shows of the regimes: per-ticker crypto regime, macro quadrant, combined."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from regime.gold_hedge import GoldHedge


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class RegimeSnapshot(_Frozen):
    crypto: dict[
        str, str
    ]  # ticker -> low_volatility / medium_volatility / high_volatility / unknown
    crypto_exposure: dict[str, float]
    macro: str  # GOLDILOCKS / REFLATION / STAGFLATION / DEFLATION / unavailable
    macro_exposure: float
    combined: str  # e.g. low_volatility_goldilocks (BTC's crypto regime x macro)
    exposure_scale: float
    notes: tuple[str, ...] = ()
    #: PAXG against BTC over the last 4h (``regime.gold_hedge``); set by the snapshot builder,
    #: which has both the context field ``paxg`` and BTC's candles
    gold_hedge: GoldHedge | None = None
