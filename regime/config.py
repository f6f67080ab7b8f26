"""The regime package's settings, as one frozen section the daemon's ``Settings`` can embed.

The FRED API key is not here: like the other secrets it belongs at the top of ``Settings``
(read from ``FRED_API_KEY``) and is passed to ``build_macro_source`` as a ``SecretStr``.
"""

from __future__ import annotations

from typing import Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from core.config_path import ConfigPath

# Kept free of numpy/pandas/hmmlearn imports: the settings model (and `vigil health`, run by the
# container's HEALTHCHECK every 30 s) imports this module.

DEFAULT_REFIT_EVERY_SECS = 86_400.0
RV_WINDOW_BARS = 6  # realised vol over 6 x 4h = 24 h
VOV_WINDOW_BARS = 6
RESTARTS_MAX = 20
#: numpy's seeds end at 2**32 - 1 and restart r fits with seed + r: past this the restarts failed,
#: each logged at INFO only, and the regime models were fitted from fewer (or no) restarts
SEED_MAX = 2**32 - RESTARTS_MAX


class CryptoHmmConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    n_states_min: int = Field(2, ge=2, le=4)
    n_states_max: int = Field(4, ge=2, le=4)
    restarts: int = Field(3, ge=1, le=RESTARTS_MAX)
    seed: int = Field(42, ge=0, le=SEED_MAX)
    n_iter: int = Field(100, ge=1)
    tol: float = Field(1e-3, gt=0)
    min_feature_rows: int = Field(100, ge=10)
    rv_window_bars: int = Field(RV_WINDOW_BARS, ge=2)
    vov_window_bars: int = Field(VOV_WINDOW_BARS, ge=2)
    #: refit from the previous model (its state count, at most ``warm_n_iter`` EM iterations);
    #: every ``full_search_every``-th fit is the full BIC search. Off: see bench/bench_hmm.py
    warm_start: bool = False
    warm_n_iter: int = Field(20, ge=1)
    full_search_every: int = Field(7, ge=1)

    @model_validator(mode="after")
    def _range(self) -> Self:
        if self.n_states_min > self.n_states_max:
            raise ValueError("n_states_min must be <= n_states_max")
        return self


class MacroRule(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    growth_series: str = "INDPRO"
    inflation_series: str = "CPIAUCSL"
    growth_trend_months: int = Field(12, ge=2, le=60)
    inflation_lookback_months: int = Field(3, ge=1, le=24)
    publication_lag_days: int = Field(45, ge=0, le=120)
    max_staleness_days: int = Field(120, ge=1)

    @property
    def months_needed(self) -> int:
        """Monthly observations to fetch: enough for either series' rule, plus slack."""
        return 12 + max(self.growth_trend_months, self.inflation_lookback_months + 1) + 12


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
    fred_snapshot_dir: ConfigPath | None = None
    #: fitted models by (candles, HMM settings): a rerun of the same span fits nothing.
    #: None: no cache (replay and sweeps default to ~/.cache/vigil/regime-fits)
    fit_cache_dir: ConfigPath | None = None
    #: processes the regime models fit in (regime.fit_pool; in replay they also fit ahead,
    #: regime.fit_ahead). None: one for the daemon, all cores but one for replay (none inside a
    #: Dask worker); 0: fit inline, in the daemon's own process (which then imports scikit-learn)
    fit_ahead_workers: int | None = Field(None, ge=0)


__all__ = ["FRED_BASE_URL", "RegimeConfig"]
