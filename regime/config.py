"""The regime package's settings, as one frozen section the daemon's ``Settings`` can embed.

The FRED API key is not here: like the other secrets it belongs at the top of ``Settings``
(read from ``FRED_API_KEY``) and is passed to ``build_macro_source`` as a ``SecretStr``.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from regime.crypto_hmm import CryptoHmmConfig
from regime.macro import MacroRule
from regime.tracker import DEFAULT_REFIT_EVERY_SECS

FRED_BASE_URL = "https://api.stlouisfed.org"


class RegimeConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    hmm: CryptoHmmConfig = CryptoHmmConfig()
    refit_every_secs: float = Field(DEFAULT_REFIT_EVERY_SECS, gt=0)
    macro_rule: MacroRule = MacroRule()
    fred_base_url: str = FRED_BASE_URL
    fred_timeout_secs: float = Field(10.0, gt=0)
    fred_cache_ttl_secs: float = Field(86_400.0, gt=0)
    fred_failure_ttl_secs: float = Field(3_600.0, gt=0)
    # real FRED downloads (<SERIES_ID>.csv) for replay without a key; none ships with vigil
    fred_snapshot_dir: Path | None = None


__all__ = ["FRED_BASE_URL", "RegimeConfig"]
