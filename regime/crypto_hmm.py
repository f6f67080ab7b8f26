"""Crypto volatility regime: a Gaussian HMM over ``regime.features`` of 4h candles.

Fit (``CryptoRegimeModel.fit``):

- Features are z-scored with the fit window's mean and standard deviation (kept with the model and
  reused by ``predict``). Raw returns have variances near 1e-4, below hmmlearn's covariance floor
  (``min_covar`` = 1e-3), which would otherwise swamp them. The scaling is affine, so it shifts every
  candidate's log-likelihood by the same constant and does not change which BIC is smallest.
- Covariance type ``diag``. On the bundled data (180-day windows of BTC, ETH and SOL at two dates)
  the diag model had a lower BIC than ``full`` in 5 of 6 windows at the chosen size, with 39
  instead of 51 parameters at 4 states; it is also faster and has no degenerate full matrices.
- For every state count n in ``n_states_min..n_states_max`` (2..4), ``restarts`` EM runs seeded
  ``seed + restart`` (42, 43, 44 by default); the best log-likelihood per n is kept.
  BIC = -2 ln L + p ln T, T the feature rows, p the free parameters of a diag GaussianHMM:
  (n - 1) start probabilities + n (n - 1) transitions + n d means + n d variances (d = 3 features).
  The smallest BIC wins; a tie goes to fewer states.
- States are ranked by their mean realised-vol feature and labelled: 2 states low/high,
  3 low/medium/high, 4 low/medium/medium/high (the two middle states are both "medium": four
  volatility levels have no more exposure steps than three).
- Fewer than ``min_feature_rows`` (100, about 17 days of 4h candles after the 11-row warm-up) ->
  no model, and ``predict`` says "unknown" with the reason.
- Deterministic: fixed seeds, single-threaded BLAS during the fit (``threadpoolctl``; also about 10x
  faster than two contending BLAS threads on this machine), strict ``>`` between restarts.
  hmmlearn's warnings (non-convergence, degenerate states) are captured into ``FitReport.warnings``.

Predict (``CryptoRegimeModel.predict``): the posterior of the frame's last feature row. For the last
row the smoothed posterior is the filtered one, so no future candle is involved.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import numpy as np
import pandas as pd
from hmmlearn.hmm import GaussianHMM
from pydantic import BaseModel, ConfigDict
from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

from regime.config import CryptoHmmConfig
from regime.features import (
    FEATURE_COLUMNS,
    STEP_MS_4H,
    BadCandlesError,
    regime_features,
    segment_lengths,
    warm_up_rows,
)
from regime.fit_cache import FitCache

log = logging.getLogger(__name__)

COVARIANCE_TYPE = "diag"
_RV_COLUMN = FEATURE_COLUMNS.index("realised_vol")
_HMMLEARN_LOGGERS = ("hmmlearn.base", "hmmlearn.hmm")
# one fit at a time per process: the BLAS thread limit and warnings capture are process-wide
_FIT_LOCK = threading.Lock()


class CryptoLabel(StrEnum):
    LOW = "low_volatility"
    MEDIUM = "medium_volatility"
    HIGH = "high_volatility"
    UNKNOWN = "unknown"


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


def hmm_parameter_count(n_states: int, n_features: int, covariance_type: str) -> int:
    """Free parameters of a GaussianHMM (start, transitions, means, covariances)."""
    covariances = {
        "spherical": n_states,
        "diag": n_states * n_features,
        "full": n_states * n_features * (n_features + 1) // 2,
        "tied": n_features * (n_features + 1) // 2,
    }[covariance_type]
    return (n_states - 1) + n_states * (n_states - 1) + n_states * n_features + covariances


def bic(log_likelihood: float, n_params: int, n_rows: int) -> float:
    return -2.0 * log_likelihood + n_params * float(np.log(n_rows))


@dataclass(frozen=True)
class _Fitted:
    hmm: Any  # GaussianHMM (untyped)
    mean: np.ndarray[Any, np.dtype[np.float64]]
    scale: np.ndarray[Any, np.dtype[np.float64]]
    rank_of_state: tuple[int, ...]  # hmm state index -> volatility rank
    labels: tuple[CryptoLabel, ...]  # by rank
    fitted_at_ms: int


class CryptoRegimeModel:
    """Fits and applies the volatility HMM for one ticker. ``fit`` may run in a worker thread."""

    def __init__(
        self, config: CryptoHmmConfig | None = None, *, cache: FitCache | None = None
    ) -> None:
        self.config = config or CryptoHmmConfig()
        self._cache = cache  # fitted results by (candles, config, fitted_at_ms): see fit_cache
        self._fitted: _Fitted | None = None  # replaced whole, so a reader never sees half a fit
        self.last_report: FitReport | None = None

    @property
    def is_fitted(self) -> bool:
        return self._fitted is not None

    async def fit_async(self, frame: pd.DataFrame, *, fitted_at_ms: int | None = None) -> FitReport:
        """``fit`` in a worker thread: it is CPU-bound (about half a second for 180 days)."""
        return await asyncio.to_thread(self.fit, frame, fitted_at_ms=fitted_at_ms)

    def fit(self, frame: pd.DataFrame, *, fitted_at_ms: int | None = None) -> FitReport:
        """Fit on ``frame``; ``fitted_at_ms`` defaults to the close time of its last candle.

        On failure the previous model (if any) stays in use and the report says why.
        """
        report, fitted = self._fit_or_cached(frame, fitted_at_ms)
        if fitted is not None:
            self._fitted = fitted
        self.last_report = report
        if report.warnings:
            # restarts that stopped early or failed are notes when the chosen fit converged
            level = logging.INFO if _chosen_converged(report) else logging.WARNING
            log.log(level, "regime HMM fit: %s", "; ".join(report.warnings))
        return report

    def predict(self, frame: pd.DataFrame) -> CryptoRegime:
        fitted = self._fitted
        if fitted is None:
            why = self.last_report.reason if self.last_report else "fit has not run yet"
            return CryptoRegime.unknown(f"no fitted regime model: {why}")
        try:
            features = self._features(frame)
        except BadCandlesError as exc:
            return CryptoRegime.unknown(f"cannot compute features: {exc}")
        if features.empty:
            return CryptoRegime.unknown(
                f"no feature rows: need more than {self._warm_up()} unbroken 4h candles"
            )
        posterior = self._posteriors(fitted, features)[-1]
        state = int(np.argmax(posterior))
        rank = fitted.rank_of_state[state]
        label = fitted.labels[rank]
        return CryptoRegime(
            label=label,
            exposure=CRYPTO_EXPOSURE[label],
            state=rank,
            probability=float(posterior[state]),
            n_states=len(fitted.labels),
            fitted_at_ms=fitted.fitted_at_ms,
            as_of_ms=int(features.index[-1]),
        )

    def label_history(self, frame: pd.DataFrame) -> pd.Series:
        """The most probable label of every feature row (smoothed: uses later rows of ``frame``).

        For analysis and tests; a live decision uses ``predict``, which looks at the last row only.
        """
        fitted = self._fitted
        if fitted is None:
            raise RuntimeError("the model is not fitted")
        features = self._features(frame)
        if features.empty:
            return pd.Series([], index=features.index, dtype=object)
        states = np.argmax(self._posteriors(fitted, features), axis=1)
        labels = [str(fitted.labels[fitted.rank_of_state[int(s)]]) for s in states]
        return pd.Series(labels, index=features.index, name="label")

    def _features(self, frame: pd.DataFrame) -> pd.DataFrame:
        return regime_features(
            frame,
            rv_window_bars=self.config.rv_window_bars,
            vov_window_bars=self.config.vov_window_bars,
        )

    def _warm_up(self) -> int:
        return warm_up_rows(self.config.rv_window_bars, self.config.vov_window_bars)

    @staticmethod
    def _posteriors(fitted: _Fitted, features: pd.DataFrame) -> np.ndarray[Any, Any]:
        scaled = (features.to_numpy(dtype=np.float64) - fitted.mean) / fitted.scale
        posteriors: np.ndarray[Any, Any] = fitted.hmm.predict_proba(
            scaled, segment_lengths(features.index)
        )
        return posteriors

    def _fit_or_cached(
        self, frame: pd.DataFrame, fitted_at_ms: int | None
    ) -> tuple[FitReport, _Fitted | None]:
        if self._cache is None:
            return self._fit(frame, fitted_at_ms)
        key = self._cache.key(frame, self.config.model_dump_json(), fitted_at_ms)
        cached = self._cache.load(key)
        if cached is not None:
            report, fitted = cached
            return report, fitted
        result = self._fit(frame, fitted_at_ms)
        self._cache.store(key, result)
        return result

    def _fit(
        self, frame: pd.DataFrame, fitted_at_ms: int | None
    ) -> tuple[FitReport, _Fitted | None]:
        try:
            features = self._features(frame)
        except BadCandlesError as exc:
            return _unfitted(0, 0, f"cannot compute features: {exc}"), None
        lengths = segment_lengths(features.index)
        n_rows = len(features)
        if n_rows < self.config.min_feature_rows:
            reason = (
                f"too little data: {n_rows} feature rows from {len(frame)} candles, "
                f"need >= {self.config.min_feature_rows}"
            )
            return _unfitted(n_rows, len(lengths), reason), None
        values = features.to_numpy(dtype=np.float64)
        mean, scale = values.mean(axis=0), values.std(axis=0)
        if not (scale > 0).all():
            return _unfitted(n_rows, len(lengths), "a feature is constant over the window"), None
        scaled = (values - mean) / scale

        notes: list[str] = []
        with _FIT_LOCK, threadpool_limits(limits=1), _captured_warnings(notes):
            fits = [self._best_of_restarts(n, scaled, lengths, notes) for n in self._sizes()]
        found = [fit for fit in fits if fit is not None]
        if not found:
            report = _unfitted(n_rows, len(lengths), "every HMM fit failed", notes)
            return report, None
        candidate, hmm = min(found, key=lambda fit: (fit[0].bic, fit[0].n_states))
        fitted = _build_fitted(candidate, hmm, mean, scale, fitted_at_ms, features)
        states = _summarise_states(fitted, hmm, scaled, lengths, features)
        report = FitReport(
            fitted=True,
            n_rows=n_rows,
            n_segments=len(lengths),
            chosen_n_states=candidate.n_states,
            candidates=tuple(fit[0] for fit in found),
            states=states,
            warnings=tuple(notes),
            fitted_at_ms=fitted.fitted_at_ms,
        )
        return report, fitted

    def _sizes(self) -> range:
        return range(self.config.n_states_min, self.config.n_states_max + 1)

    def _best_of_restarts(
        self,
        n_states: int,
        scaled: np.ndarray[Any, Any],
        lengths: list[int],
        notes: list[str],
    ) -> tuple[CandidateFit, Any] | None:
        best: tuple[CandidateFit, Any] | None = None
        n_params = hmm_parameter_count(n_states, scaled.shape[1], COVARIANCE_TYPE)
        for restart in range(self.config.restarts):
            seed = self.config.seed + restart
            hmm = GaussianHMM(
                n_components=n_states,
                covariance_type=COVARIANCE_TYPE,
                n_iter=self.config.n_iter,
                tol=self.config.tol,
                random_state=seed,
            )
            try:
                hmm.fit(scaled, lengths)
                log_likelihood = float(hmm.score(scaled, lengths))
            except (ValueError, np.linalg.LinAlgError) as exc:
                notes.append(f"n={n_states} seed={seed}: fit failed: {exc}")
                continue
            if not np.isfinite(log_likelihood):
                notes.append(f"n={n_states} seed={seed}: non-finite log-likelihood, skipped")
                continue
            converged = _converged(hmm.monitor_, self.config.n_iter, self.config.tol)
            if not converged:
                notes.append(
                    f"n={n_states} seed={seed}: EM stopped at n_iter={self.config.n_iter} "
                    "before converging"
                )
            candidate = CandidateFit(
                n_states=n_states,
                seed=seed,
                log_likelihood=log_likelihood,
                n_params=n_params,
                bic=bic(log_likelihood, n_params, len(scaled)),
                converged=converged,
                iterations=int(hmm.monitor_.iter),
            )
            if best is None or candidate.log_likelihood > best[0].log_likelihood:
                best = (candidate, hmm)
        return best


def _chosen_converged(report: FitReport) -> bool:
    chosen = [c for c in report.candidates if c.n_states == report.chosen_n_states]
    return report.fitted and bool(chosen) and all(c.converged for c in chosen)


def _converged(monitor: Any, n_iter: int, tol: float) -> bool:
    """hmmlearn's own ``converged`` is also true when EM merely ran out of iterations."""
    history = list(monitor.history)
    gained_little = len(history) >= 2 and history[-1] - history[-2] < tol
    return bool(gained_little or monitor.iter < n_iter)


def _unfitted(
    n_rows: int, n_segments: int, reason: str, notes: list[str] | None = None
) -> FitReport:
    return FitReport(
        fitted=False,
        n_rows=n_rows,
        n_segments=n_segments,
        reason=reason,
        warnings=tuple(notes or ()),
    )


def _build_fitted(
    candidate: CandidateFit,
    hmm: Any,
    mean: np.ndarray[Any, np.dtype[np.float64]],
    scale: np.ndarray[Any, np.dtype[np.float64]],
    fitted_at_ms: int | None,
    features: pd.DataFrame,
) -> _Fitted:
    order = np.argsort(np.asarray(hmm.means_)[:, _RV_COLUMN], kind="stable")
    rank_of_state = [0] * candidate.n_states
    for rank, state in enumerate(order.tolist()):
        rank_of_state[state] = rank
    if fitted_at_ms is None:
        fitted_at_ms = int(features.index[-1]) + STEP_MS_4H  # the last candle's close
    return _Fitted(
        hmm=hmm,
        mean=mean,
        scale=scale,
        rank_of_state=tuple(rank_of_state),
        labels=LABELS_BY_N_STATES[candidate.n_states],
        fitted_at_ms=fitted_at_ms,
    )


def _summarise_states(
    fitted: _Fitted,
    hmm: Any,
    scaled: np.ndarray[Any, Any],
    lengths: list[int],
    features: pd.DataFrame,
) -> tuple[StateSummary, ...]:
    occupancy = np.asarray(hmm.predict_proba(scaled, lengths)).mean(axis=0)
    means = np.asarray(hmm.means_) * fitted.scale + fitted.mean  # back to feature units
    by_rank = sorted(range(len(fitted.rank_of_state)), key=lambda s: fitted.rank_of_state[s])
    columns = {name: i for i, name in enumerate(features.columns)}
    return tuple(
        StateSummary(
            rank=fitted.rank_of_state[state],
            label=fitted.labels[fitted.rank_of_state[state]],
            mean_realised_vol=float(means[state, columns["realised_vol"]]),
            mean_vol_of_vol=float(means[state, columns["vol_of_vol"]]),
            mean_log_return=float(means[state, columns["log_return"]]),
            occupancy_pct=float(100.0 * occupancy[state]),
        )
        for state in by_rank
    )


class _CaptureThisThread(logging.Filter):
    """Takes hmmlearn's log records raised by the fitting thread (other threads pass through)."""

    def __init__(self, notes: list[str]) -> None:
        super().__init__()
        self._thread = threading.get_ident()
        self._notes = notes

    def filter(self, record: logging.LogRecord) -> bool:
        if record.thread != self._thread:
            return True
        self._notes.append(f"hmmlearn: {record.getMessage()}")
        return False


@contextmanager
def _captured_warnings(notes: list[str]) -> Iterator[None]:
    """hmmlearn's warnings (log records and ``warnings.warn``) go into ``notes``, not the log.

    ``catch_warnings`` is process-wide: a warning another thread raises meanwhile is caught too, so
    anything not from hmmlearn / scikit-learn is re-issued afterwards instead of being swallowed.
    """
    capture = _CaptureThisThread(notes)
    loggers = [logging.getLogger(name) for name in _HMMLEARN_LOGGERS]
    for logger in loggers:
        logger.addFilter(capture)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield
    finally:
        for logger in loggers:
            logger.removeFilter(capture)
    for item in caught:
        if "hmmlearn" in item.filename or "sklearn" in item.filename:
            notes.append(f"{item.category.__name__}: {item.message}")
        else:
            warnings.warn_explicit(item.message, item.category, item.filename, item.lineno)


__all__ = [
    "COVARIANCE_TYPE",
    "CRYPTO_EXPOSURE",
    "LABELS_BY_N_STATES",
    "CandidateFit",
    "CryptoHmmConfig",
    "CryptoLabel",
    "CryptoRegime",
    "CryptoRegimeModel",
    "FitReport",
    "StateSummary",
    "bic",
    "hmm_parameter_count",
]
