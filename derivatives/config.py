"""The derivatives package's settings: one frozen section the daemon's ``Settings`` can embed.

Base URL defaults are the real public, key-less hosts; tests and the simulator pass loopback URLs
and nothing here is contacted at import. ``binance_rest_url`` None means "the market section's
REST URL" (the simulator's when running against it).
"""

from __future__ import annotations

from typing import Final

from pydantic import BaseModel, ConfigDict, Field

from core.backoff import Backoff
from derivatives.cache import CachePolicy

#: alternative.me's Fear & Greed API (``/fng/``)
FNG_BASE_URL: Final = "https://api.alternative.me"
#: DeFiLlama's stablecoins API (``/stablecoins``)
DEFILLAMA_BASE_URL: Final = "https://stablecoins.llama.fi"
#: CoinGecko's public API (``/api/v3/search/trending``)
COINGECKO_BASE_URL: Final = "https://api.coingecko.com"
#: Binance USDⓈ-M REST (premiumIndex, openInterestHist, futures/data/*)
BINANCE_FAPI_URL: Final = "https://fapi.binance.com"
#: Farside Investors' US spot-BTC-ETF flow table (HTML, no key; ``derivatives.etf_flow``)
FARSIDE_BTC_URL: Final = "https://farside.co.uk/bitcoin-etf-flow-all-data/"
#: Binance spot REST (``/api/v3/klines`` of PAXGUSDT, the gold hedge)
BINANCE_SPOT_URL: Final = "https://api.binance.com"


class SourceTiming(BaseModel):
    """One source's timeout, cache TTL, stale limit and backoff (seconds of the daemon's clock;
    the timeout is real seconds)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    ttl_secs: float = Field(gt=0)
    timeout_secs: float = Field(10.0, gt=0)
    stale_factor: float = Field(3.0, ge=1)
    backoff_base_secs: float = Field(5.0, gt=0)
    backoff_cap_secs: float = Field(600.0, gt=0)
    jitter_fraction: float = Field(0.5, ge=0, le=1)

    def policy(self) -> CachePolicy:
        return CachePolicy(
            ttl_secs=self.ttl_secs,
            timeout_secs=self.timeout_secs,
            stale_factor=self.stale_factor,
            backoff_base_secs=self.backoff_base_secs,
            backoff_cap_secs=self.backoff_cap_secs,
            jitter_fraction=self.jitter_fraction,
        )


def _timing(ttl_secs: float) -> SourceTiming:
    return SourceTiming(ttl_secs=ttl_secs)


class DerivativesConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    enabled: bool = True
    binance_rest_url: str | None = None
    # None disables a source (its field is null with that reason): against the simulator, point
    # fng_base_url at the sim's REST URL (it serves /fng/) and set the other two to None
    fng_base_url: str | None = FNG_BASE_URL
    defillama_base_url: str | None = DEFILLAMA_BASE_URL
    coingecko_base_url: str | None = COINGECKO_BASE_URL
    binance_spot_url: str | None = BINANCE_SPOT_URL
    etf_flow_url: str | None = FARSIDE_BTC_URL
    # adaptive cadence
    normal_interval_secs: float = Field(300.0, gt=0)
    fast_interval_secs: float = Field(60.0, gt=0)
    quiet_secs_before_slowing: float = Field(900.0, ge=0)
    fast_funding_abs: float = Field(0.0005, gt=0)  # 0.05 % per 8 h, either sign
    fast_open_interest_change_pct: float = Field(10.0, gt=0)
    loop_backoff_base_secs: float = Field(5.0, gt=0)
    loop_backoff_cap_secs: float = Field(300.0, gt=0)

    @property
    def loop_backoff(self) -> Backoff:
        """The poll loop's own backoff after an unexpected failure."""
        return Backoff(base_secs=self.loop_backoff_base_secs, cap_secs=self.loop_backoff_cap_secs)

    # per-source timing: Binance data refreshes each poll; outside context on its own cadence
    funding: SourceTiming = _timing(55.0)
    open_interest: SourceTiming = _timing(55.0)
    taker_delta: SourceTiming = _timing(55.0)
    long_short: SourceTiming = _timing(55.0)
    basis: SourceTiming = _timing(55.0)
    liquidations: SourceTiming = _timing(55.0)
    stablecoin_supply: SourceTiming = _timing(4 * 3600.0)
    fear_greed: SourceTiming = _timing(3600.0)
    trending: SourceTiming = _timing(3600.0)
    etf_flow: SourceTiming = _timing(24 * 3600.0)  # a daily figure: polled daily
    paxg: SourceTiming = _timing(55.0)
    liquidation_cascade_usd: float = Field(10_000_000.0, gt=0)


__all__ = [
    "BINANCE_FAPI_URL",
    "BINANCE_SPOT_URL",
    "COINGECKO_BASE_URL",
    "DEFILLAMA_BASE_URL",
    "FARSIDE_BTC_URL",
    "FNG_BASE_URL",
    "DerivativesConfig",
    "SourceTiming",
]
