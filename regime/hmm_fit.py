"""Fitting the crypto volatility HMM: a pure function of (settings, candles, fit instant).

``fit_hmm`` is what ``CryptoRegimeModel.fit`` runs, in a child process (``regime.fit_pool``; in
replay also ahead of time, ``regime.fit_ahead``) or inline: being pure and module-level, it pickles,
and the same inputs give the same floats in either process (fixed seeds, single-threaded BLAS). The
fitted model it returns is plain arrays (``regime.hmm_predict.HmmParams``), so the process that
receives it needs neither hmmlearn's model classes nor scikit-learn to use it.

The fit instant only stamps the result (``stamp``), so a fit computed ahead, before its instant is
known, and stamped on arrival is the very result of a fit made at that instant.

Full search (the default): for every state count, ``restarts`` seeded EM runs, the best
log-likelihood per count, the smallest BIC overall (see ``regime.crypto_hmm``). Warm start (opt-in,
``CryptoHmmConfig.warm_start``): one EM run at the previous model's state count, initialised from
its parameters mapped into this window's scaling, ``warm_n_iter`` iterations at most.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pandas as pd

from regime.config import CryptoHmmConfig
from regime.features import (
    FEATURE_COLUMNS,
    STEP_MS_4H,
    BadCandlesError,
    regime_features,
    segment_lengths,
)
from regime.hmm_predict import HmmParams
from regime.hmm_types import (
    COVARIANCE_TYPE,
    LABELS_BY_N_STATES,
    CandidateFit,
    FitReport,
    FitResult,
    FittedHmm,
    StateSummary,
)

_RV_COLUMN = FEATURE_COLUMNS.index("realised_vol")
_HMMLEARN_LOGGERS = ("hmmlearn.base", "hmmlearn.hmm")
# one fit at a time per process: the BLAS thread limit and warnings capture are process-wide
_FIT_LOCK = threading.Lock()

Array = np.ndarray[Any, Any]


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


def features_of(config: CryptoHmmConfig, frame: pd.DataFrame) -> pd.DataFrame:
    return regime_features(
        frame, rv_window_bars=config.rv_window_bars, vov_window_bars=config.vov_window_bars
    )


def fit_hmm(
    config: CryptoHmmConfig,
    frame: pd.DataFrame,
    fitted_at_ms: int | None = None,
    *,
    warm: FittedHmm | None = None,
) -> FitResult:
    """Fit on ``frame``; ``fitted_at_ms`` defaults to the close time of its last candle.
    ``warm``: start from that model instead of the full search (see the module docstring)."""
    return stamp(_fit_unstamped(config, frame, warm), fitted_at_ms)


def stamp(result: FitResult, fitted_at_ms: int | None) -> FitResult:
    """``result`` as fitted at ``fitted_at_ms`` (None: keep the default, the last candle's close)."""
    report, fitted = result
    if fitted is None or fitted_at_ms is None:
        return result
    return (
        report.model_copy(update={"fitted_at_ms": fitted_at_ms}),
        dataclasses.replace(fitted, fitted_at_ms=fitted_at_ms),
    )


def _fit_unstamped(
    config: CryptoHmmConfig, frame: pd.DataFrame, warm: FittedHmm | None
) -> FitResult:
    try:
        features = features_of(config, frame)
    except BadCandlesError as exc:
        return _unfitted(0, 0, f"cannot compute features: {exc}"), None
    lengths = segment_lengths(features.index)
    n_rows = len(features)
    if n_rows < config.min_feature_rows:
        reason = (
            f"too little data: {n_rows} feature rows from {len(frame)} candles, "
            f"need >= {config.min_feature_rows}"
        )
        return _unfitted(n_rows, len(lengths), reason), None
    values = features.to_numpy(dtype=np.float64)
    mean, scale = values.mean(axis=0), values.std(axis=0)
    if not (scale > 0).all():
        return _unfitted(n_rows, len(lengths), "a feature is constant over the window"), None
    scaled = (values - mean) / scale

    # imported here: a process that only predicts (the daemon, ``regime.hmm_predict``) never loads
    # hmmlearn's model classes, scikit-learn and SciPy. Before the thread limit: SciPy brings its
    # own BLAS, which threadpool_limits only limits if it is already loaded (a first fit with it
    # unlimited differs from later ones in the last bits)
    import hmmlearn.hmm  # noqa: F401
    from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

    notes: list[str] = []
    with _FIT_LOCK, threadpool_limits(limits=1), _captured_warnings(notes):
        if warm is None:
            sizes = range(config.n_states_min, config.n_states_max + 1)
            fits = [_best_of_restarts(config, n, scaled, lengths, notes) for n in sizes]
        else:
            fits = [_warm_fit(config, warm, mean, scale, scaled, lengths, notes)]
    found = [fit for fit in fits if fit is not None]
    if not found:
        return _unfitted(n_rows, len(lengths), "every HMM fit failed", notes), None
    candidate, hmm = min(found, key=lambda fit: (fit[0].bic, fit[0].n_states))
    fitted = _build_fitted(candidate, hmm, mean, scale, features)
    report = FitReport(
        fitted=True,
        n_rows=n_rows,
        n_segments=len(lengths),
        chosen_n_states=candidate.n_states,
        candidates=tuple(fit[0] for fit in found),
        states=_summarise_states(fitted, hmm, scaled, lengths, features),
        warnings=tuple(notes),
        fitted_at_ms=fitted.fitted_at_ms,
    )
    return report, fitted


def _best_of_restarts(
    config: CryptoHmmConfig, n_states: int, scaled: Array, lengths: list[int], notes: list[str]
) -> tuple[CandidateFit, Any] | None:
    from hmmlearn.hmm import GaussianHMM

    best: tuple[CandidateFit, Any] | None = None
    for restart in range(config.restarts):
        seed = config.seed + restart
        hmm = GaussianHMM(
            n_components=n_states,
            covariance_type=COVARIANCE_TYPE,
            n_iter=config.n_iter,
            tol=config.tol,
            random_state=seed,
        )
        candidate = _run_em(hmm, n_states, seed, config.n_iter, config.tol, scaled, lengths, notes)
        if candidate is not None and (
            best is None or candidate.log_likelihood > best[0].log_likelihood
        ):
            best = (candidate, hmm)
    return best


def _warm_fit(
    config: CryptoHmmConfig,
    warm: FittedHmm,
    mean: Array,
    scale: Array,
    scaled: Array,
    lengths: list[int],
    notes: list[str],
) -> tuple[CandidateFit, Any] | None:
    """One EM run from ``warm``'s parameters, carried from its window's scaling into this one."""
    from hmmlearn.hmm import GaussianHMM

    previous = warm.params
    n_states = previous.n_states
    hmm = GaussianHMM(
        n_components=n_states,
        covariance_type=COVARIANCE_TYPE,
        n_iter=config.warm_n_iter,
        tol=config.tol,
        random_state=config.seed,
        init_params="",  # every parameter is set below
    )
    hmm.startprob_ = np.asarray(previous.startprob)
    hmm.transmat_ = np.asarray(previous.transmat)
    means = np.asarray(previous.means) * warm.scale + warm.mean  # back to feature units
    hmm.means_ = (means - mean) / scale
    variances = np.asarray(previous.covars) * warm.scale**2  # diag: (n_states, n_features)
    hmm.covars_ = np.maximum(variances / scale**2, hmm.min_covar)
    candidate = _run_em(hmm, n_states, -1, config.warm_n_iter, config.tol, scaled, lengths, notes)
    return None if candidate is None else (candidate, hmm)


def _run_em(
    hmm: Any,
    n_states: int,
    seed: int,
    n_iter: int,
    tol: float,
    scaled: Array,
    lengths: list[int],
    notes: list[str],
) -> CandidateFit | None:
    """Fit ``hmm`` in place; its candidate entry, or None (noted) when EM failed."""
    label = f"n={n_states} seed={seed}" if seed >= 0 else f"n={n_states} warm start"
    try:
        hmm.fit(scaled, lengths)
        log_likelihood = float(hmm.score(scaled, lengths))
    except (ValueError, np.linalg.LinAlgError) as exc:
        notes.append(f"{label}: fit failed: {exc}")
        return None
    if not np.isfinite(log_likelihood):
        notes.append(f"{label}: non-finite log-likelihood, skipped")
        return None
    converged = _converged(hmm.monitor_, n_iter, tol)
    if not converged:
        notes.append(f"{label}: EM stopped at n_iter={n_iter} before converging")
    n_params = hmm_parameter_count(n_states, scaled.shape[1], COVARIANCE_TYPE)
    return CandidateFit(
        n_states=n_states,
        seed=seed,
        log_likelihood=log_likelihood,
        n_params=n_params,
        bic=bic(log_likelihood, n_params, len(scaled)),
        converged=converged,
        iterations=int(hmm.monitor_.iter),
    )


def chosen_converged(report: FitReport) -> bool:
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
    features: pd.DataFrame,
) -> FittedHmm:
    order = np.argsort(np.asarray(hmm.means_)[:, _RV_COLUMN], kind="stable")
    rank_of_state = [0] * candidate.n_states
    for rank, state in enumerate(order.tolist()):
        rank_of_state[state] = rank
    return FittedHmm(
        params=HmmParams.of(hmm),
        mean=mean,
        scale=scale,
        rank_of_state=tuple(rank_of_state),
        labels=LABELS_BY_N_STATES[candidate.n_states],
        fitted_at_ms=int(features.index[-1]) + STEP_MS_4H,  # the last candle's close (stamp)
    )


def _summarise_states(
    fitted: FittedHmm,
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
    "bic",
    "chosen_converged",
    "features_of",
    "fit_hmm",
    "hmm_parameter_count",
    "stamp",
]
