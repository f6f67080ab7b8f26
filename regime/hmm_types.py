"""The crypto volatility regime's vocabulary: labels, fit reports, the regime a model predicts, and
the fitted model itself (``FittedHmm``: what a fit produces, what the fit cache and the fit-ahead
pool carry between processes, what ``predict`` reads)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict

from regime.hmm_predict import HmmParams
from regime.labels import CryptoLabel

COVARIANCE_TYPE = "diag"


CRYPTO_EXPOSURE: dict[CryptoLabel, float] = {
    CryptoLabel.LOW: 1.0,
    CryptoLabel.MEDIUM: 0.8,
    CryptoLabel.HIGH: 0.6,
    CryptoLabel.UNKNOWN: 1.0,  # no view: leave sizing to the other caps
}

LABELS_BY_N_STATES: dict[int, tuple[CryptoLabel, ...]] = {
    2: (CryptoLabel.LOW, CryptoLabel.HIGH),
    3: (CryptoLabel.LOW, CryptoLabel.MEDIUM, CryptoLabel.HIGH),
    4: (CryptoLabel.LOW, CryptoLabel.MEDIUM, CryptoLabel.MEDIUM, CryptoLabel.HIGH),
}


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class CandidateFit(_Frozen):
    """The best restart for one state count."""

    n_states: int
    seed: int
    log_likelihood: float
    n_params: int
    bic: float
    converged: bool
    iterations: int


class StateSummary(_Frozen):
    rank: int  # 0 = calmest
    label: CryptoLabel
    mean_realised_vol: float  # per 4h bar, unscaled
    mean_vol_of_vol: float
    mean_log_return: float
    occupancy_pct: float  # share of the fit window's posterior mass


class FitReport(_Frozen):
    fitted: bool
    n_rows: int  # feature rows
    n_segments: int  # unbroken candle runs
    covariance_type: str = COVARIANCE_TYPE
    chosen_n_states: int | None = None
    candidates: tuple[CandidateFit, ...] = ()
    states: tuple[StateSummary, ...] = ()
    warnings: tuple[str, ...] = ()
    fitted_at_ms: int | None = None
    reason: str | None = None  # why no model was fitted


class CryptoRegime(_Frozen):
    label: CryptoLabel
    exposure: float
    state: int | None = None  # volatility rank, 0 = calmest
    probability: float | None = None  # posterior of that state at the last candle
    n_states: int | None = None
    fitted_at_ms: int | None = None
    as_of_ms: int | None = None  # open time of the last candle used
    reason: str | None = None  # set when unknown

    @classmethod
    def unknown(cls, reason: str, *, as_of_ms: int | None = None) -> CryptoRegime:
        return cls(
            label=CryptoLabel.UNKNOWN,
            exposure=CRYPTO_EXPOSURE[CryptoLabel.UNKNOWN],
            reason=reason,
            as_of_ms=as_of_ms,
        )


@dataclass(frozen=True)
class FittedHmm:
    params: HmmParams  # plain arrays: unpickling a fit needs neither hmmlearn nor scikit-learn
    mean: np.ndarray[Any, np.dtype[np.float64]]
    scale: np.ndarray[Any, np.dtype[np.float64]]
    rank_of_state: tuple[int, ...]  # hmm state index -> volatility rank
    labels: tuple[CryptoLabel, ...]  # by rank
    fitted_at_ms: int


#: a fit's outcome: the report, and the model when one was fitted
FitResult = tuple[FitReport, FittedHmm | None]


__all__ = [
    "COVARIANCE_TYPE",
    "CRYPTO_EXPOSURE",
    "LABELS_BY_N_STATES",
    "CandidateFit",
    "CryptoLabel",
    "CryptoRegime",
    "FitReport",
    "FitResult",
    "FittedHmm",
    "StateSummary",
]
