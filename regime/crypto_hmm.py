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
- The fit itself is ``regime.hmm_fit.fit_hmm`` (pure, so it can run in a child process:
  ``regime.fit_pool``, and replay can run it ahead: ``regime.fit_ahead``); the vocabulary is in
  ``regime.hmm_types``. Predict needs only the fitted parameters (``regime.hmm_predict``), so a
  process that does not fit never imports hmmlearn's model classes or scikit-learn.
- Warm start (opt-in, ``warm_start``): a refit starts from the previous model's parameters with at
  most ``warm_n_iter`` EM iterations at its state count; every ``full_search_every``-th fit is the
  full search again. Figures: ``python -m bench hmm``.

Predict (``CryptoRegimeModel.predict``): the posterior of the frame's last feature row. For the last
row the smoothed posterior is the filtered one, so no future candle is involved.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Protocol

import numpy as np
import pandas as pd

from regime.config import CryptoHmmConfig
from regime.features import BadCandlesError, feature_rows, segment_lengths, warm_up_rows
from regime.fit_cache import FitCache
from regime.hmm_fit import bic, chosen_converged, fit_hmm, hmm_parameter_count, stamp
from regime.hmm_predict import last_posterior
from regime.hmm_types import (
    COVARIANCE_TYPE,
    CRYPTO_EXPOSURE,
    LABELS_BY_N_STATES,
    CandidateFit,
    CryptoLabel,
    CryptoRegime,
    FitReport,
    FitResult,
    FittedHmm,
    StateSummary,
)

log = logging.getLogger(__name__)


class FitSource(Protocol):
    """Fits computed elsewhere ahead of time (``regime.fit_ahead.FitAhead``): the unstamped result
    of ``fit_hmm(config, frame)`` when it has exactly that, else None (the model fits itself)."""

    def take(self, config: CryptoHmmConfig, frame: pd.DataFrame) -> FitResult | None: ...


class Fitter(Protocol):
    """Runs ``fit_hmm`` (itself, inline; or ``regime.fit_pool.FitPool.fit``, in a child process)."""

    def __call__(
        self,
        config: CryptoHmmConfig,
        frame: pd.DataFrame,
        fitted_at_ms: int | None = None,
        *,
        warm: FittedHmm | None = None,
    ) -> FitResult: ...


class CryptoRegimeModel:
    """Fits and applies the volatility HMM for one ticker. ``fit`` may run in a worker thread."""

    def __init__(
        self,
        config: CryptoHmmConfig | None = None,
        *,
        cache: FitCache | None = None,
        ahead: FitSource | None = None,
        fitter: Fitter = fit_hmm,
    ) -> None:
        self.config = config or CryptoHmmConfig()
        self._fitter = fitter
        self._cache = cache  # fitted results by (candles, config, fitted_at_ms): see fit_cache
        self._ahead = ahead
        self._fitted: FittedHmm | None = None  # replaced whole, so a reader never sees half a fit
        self._warm_fits = 0  # warm-started fits since the last full search
        self.last_report: FitReport | None = None

    @property
    def is_fitted(self) -> bool:
        return self._fitted is not None

    def fit(self, frame: pd.DataFrame, *, fitted_at_ms: int | None = None) -> FitReport:
        """Fit on ``frame``; ``fitted_at_ms`` defaults to the close time of its last candle.

        On failure the previous model (if any) stays in use and the report says why.
        """
        warm = self._warm_start_from()
        report, fitted = self._fit_or_cached(frame, fitted_at_ms, warm)
        if fitted is not None:
            self._fitted = fitted
            self._warm_fits = self._warm_fits + 1 if warm is not None else 0
        self.last_report = report
        if report.warnings:
            # restarts that stopped early or failed are notes when the chosen fit converged
            level = logging.INFO if chosen_converged(report) else logging.WARNING
            log.log(level, "regime HMM fit: %s", "; ".join(report.warnings))
        return report

    def predict(self, frame: pd.DataFrame) -> CryptoRegime:
        fitted = self._fitted
        if fitted is None:
            why = self.last_report.reason if self.last_report else "fit has not run yet"
            return CryptoRegime.unknown(f"no fitted regime model: {why}")
        try:
            values, open_ms = feature_rows(
                frame,
                rv_window_bars=self.config.rv_window_bars,
                vov_window_bars=self.config.vov_window_bars,
            )
        except BadCandlesError as exc:
            return CryptoRegime.unknown(f"cannot compute features: {exc}")
        if not len(values):
            warm_up = warm_up_rows(self.config.rv_window_bars, self.config.vov_window_bars)
            return CryptoRegime.unknown(
                f"no feature rows: need more than {warm_up} unbroken 4h candles"
            )
        scaled = (values - fitted.mean) / fitted.scale
        # the last row's smoothed posterior is its filtered one: no later candle is involved
        posterior = last_posterior(fitted.params, scaled, segment_lengths(open_ms))
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
            as_of_ms=int(open_ms[-1]),
        )

    def _warm_start_from(self) -> FittedHmm | None:
        """The model the next fit starts from (None: the full search)."""
        if not self.config.warm_start or self._fitted is None:
            return None
        if self._warm_fits + 1 >= self.config.full_search_every:
            return None  # the periodic full search: the state count may have changed
        return self._fitted

    def _fit_or_cached(
        self, frame: pd.DataFrame, fitted_at_ms: int | None, warm: FittedHmm | None
    ) -> FitResult:
        if self._cache is None:
            return self._compute(frame, fitted_at_ms, warm)
        settings = self.config.model_dump_json()
        if warm is not None:  # a warm fit follows its starting point too
            settings += f"|warm:{_digest(warm)}"
        key = self._cache.key(frame, settings)
        cached = self._cache.load(key)
        if cached is not None:
            return stamp(cached, fitted_at_ms)
        unstamped = self._compute(frame, None, warm)
        self._cache.store(key, unstamped)
        return stamp(unstamped, fitted_at_ms)

    def _compute(
        self, frame: pd.DataFrame, fitted_at_ms: int | None, warm: FittedHmm | None
    ) -> FitResult:
        if warm is None and self._ahead is not None:
            ready = self._ahead.take(self.config, frame)
            if ready is not None:
                return stamp(ready, fitted_at_ms)
        return self._fitter(self.config, frame, fitted_at_ms, warm=warm)


def _digest(fitted: FittedHmm) -> str:
    digest = hashlib.sha256()
    params = fitted.params
    for array in (
        params.startprob,
        params.transmat,
        params.means,
        params.covars,
        fitted.mean,
        fitted.scale,
    ):
        digest.update(np.ascontiguousarray(array, dtype=np.float64).tobytes())
    return digest.hexdigest()


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
    "FitSource",
    "Fitter",
    "StateSummary",
    "bic",
    "hmm_parameter_count",
]
