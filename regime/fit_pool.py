"""Regime fits in child processes, so the daemon's own process never imports hmmlearn's model
classes, scikit-learn and SciPy (about 95 MB of its resident memory); it predicts with
``regime.hmm_predict``, which needs none of them.

``FitPool`` is a spawn-context ``ProcessPoolExecutor`` started at its first fit (a daemon whose
models never fit, or a replay served from the fit cache, starts no process). ``fit`` runs the very
``fit_hmm`` the daemon ran inline before, on the same arguments: being pure (fixed seeds,
single-threaded BLAS) it returns the same floats in either process, so journals are byte-identical
to inline fits. The live and simulator daemons use one worker (``daemon_fit_workers``); replay shares
its pool with the fit-ahead planner (``regime.fit_ahead``). ``fit_ahead_workers = 0`` keeps every
fit inline, in the daemon's process.

A pool that cannot run (a worker killed, no process could be started) costs one inline fit, never a
different result: the next fit starts a new pool.
"""

from __future__ import annotations

import logging
import multiprocessing
import threading
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

import pandas as pd

from core.child_process import spawn_pool
from regime.config import CryptoHmmConfig
from regime.hmm_fit import fit_hmm
from regime.hmm_types import FitResult, FittedHmm

log = logging.getLogger(__name__)


class FitPool:
    """``keep_alive=False`` (the daemon): the workers exit when no fit is running and nobody holds
    the pool (``hold``), so the ~200 MB of a fitting process are held for the seconds of a day's
    fits only, at the cost of starting a process (about 2 s of CPU) for each batch; replay keeps
    them for the whole run.

    A batch is the fits somebody expects to come one after another: the daemon fits its tickers
    one by one (at start-up, and at the 4h close of a day's refit), and without a hold each fit
    started its own process (three starts where one does)."""

    def __init__(self, workers: int, *, keep_alive: bool = True) -> None:
        if workers <= 0:
            raise ValueError(f"a fit pool needs at least one worker, got {workers}")
        self.workers = workers
        self.keep_alive = keep_alive
        self.pool_fits = 0  # fits a worker made
        self.inline_fits = 0  # fits made here because the pool could not run
        self.starts = 0  # pools started (one per batch of fits when not kept alive)
        self._pool: ProcessPoolExecutor | None = None
        self._running = 0  # fits in ``fit`` now
        self._holds = 0  # ``hold`` calls not yet released
        self._lock = threading.Lock()  # the daemon fits from worker threads, one per ticker

    @property
    def started(self) -> bool:
        return self._pool is not None

    def submit(
        self,
        config: CryptoHmmConfig,
        frame: pd.DataFrame,
        fitted_at_ms: int | None = None,
        *,
        warm: FittedHmm | None = None,
    ) -> Future[FitResult]:
        return self._executor().submit(fit_hmm, config, frame, fitted_at_ms, warm=warm)

    def fit(
        self,
        config: CryptoHmmConfig,
        frame: pd.DataFrame,
        fitted_at_ms: int | None = None,
        *,
        warm: FittedHmm | None = None,
    ) -> FitResult:
        """``fit_hmm(config, frame, fitted_at_ms, warm=warm)`` in a worker (blocking)."""
        with self._lock:
            self._running += 1
        try:
            result = self.submit(config, frame, fitted_at_ms, warm=warm).result()
        except (BrokenProcessPool, OSError) as exc:
            log.warning("regime fit process failed (%s); fitting in the daemon's process", exc)
            self._discard()
            self.inline_fits += 1
            return fit_hmm(config, frame, fitted_at_ms, warm=warm)
        finally:
            with self._lock:
                self._running -= 1
            self._stop_if_idle()
        self.pool_fits += 1
        return result

    def hold(self) -> None:
        """More fits are coming: a started pool stays up until ``release`` (starts nothing)."""
        with self._lock:
            self._holds += 1

    def release(self) -> None:
        """The end of a ``hold``: the pool stops now if no fit is running and nothing else holds it."""
        with self._lock:
            if self._holds <= 0:
                raise RuntimeError("FitPool.release without a hold")
            self._holds -= 1
        self._stop_if_idle()

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)

    def _executor(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = spawn_pool(self.workers)
                self.starts += 1
            return self._pool

    def _stop_if_idle(self) -> None:
        with self._lock:
            idle = self._running == 0 and self._holds == 0 and not self.keep_alive
            pool, self._pool = (self._pool, None) if idle else (None, self._pool)
        if pool is not None:
            pool.shutdown(wait=False)  # nothing is queued: the worker exits on its own

    def _discard(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)


def daemon_fit_workers(fit_ahead_workers: int | None) -> int:
    """The daemon's fit processes: the setting, else one (a day's three fits take about a second);
    none inside a daemonic process (a Dask worker may not start children)."""
    if multiprocessing.current_process().daemon:
        return 0
    return 1 if fit_ahead_workers is None else fit_ahead_workers


__all__ = ["FitPool", "daemon_fit_workers"]
