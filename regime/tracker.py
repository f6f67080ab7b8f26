"""Keeps each ticker's crypto regime current: refit on a cadence, predict on every 4h close.

One model per ticker, not one BTC model for all: the states are volatility levels, and SOL's calm
is near BTC's storm (on the bundled data SOL's median 4h realised vol, 1.35 %, is about twice BTC's
0.69 % and level with BTC's 90th percentile), so a BTC-fitted model would call SOL "high volatility"
most of the time. Three daily fits of about half a
second each, in a worker thread, are cheap. Replay passes ``offload=run_inline``: a fit then runs on
the event loop, so its result lands at the same point of every run (byte-identical journals).

A ticker is refitted at its first 4h close and then once ``refit_every_secs`` of clock time has
passed since its last successful fit. A failed fit (too little data, every restart failed) keeps the
previous model and is retried at the next close.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import pandas as pd

from core.clock import Clock
from regime.config import DEFAULT_REFIT_EVERY_SECS
from regime.crypto_hmm import CryptoRegime, CryptoRegimeModel, FitReport

log = logging.getLogger(__name__)

#: how a fit leaves the event loop: ``asyncio.to_thread`` (live) or ``run_inline`` (replay)
Offload = Callable[..., Awaitable[Any]]


async def run_inline(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """An ``Offload`` that runs ``fn`` on the event loop itself."""
    return fn(*args, **kwargs)


class RegimeModel(Protocol):
    """What the tracker needs from a model (``CryptoRegimeModel`` or a test fake)."""

    def fit(self, frame: pd.DataFrame, *, fitted_at_ms: int | None = None) -> FitReport: ...

    def predict(self, frame: pd.DataFrame) -> CryptoRegime: ...


class FitPlanner(Protocol):
    """Told of every fit (``regime.fit_ahead.FitAhead``)."""

    def after_fit(self, ticker: str, fitted_at_ms: int, fitted: bool) -> None: ...


class CryptoRegimeTracker:
    def __init__(
        self,
        clock: Clock,
        model_factory: Callable[[], RegimeModel] = CryptoRegimeModel,
        refit_every_secs: float = DEFAULT_REFIT_EVERY_SECS,
        *,
        offload: Offload = asyncio.to_thread,
        ahead: FitPlanner | None = None,
    ) -> None:
        if refit_every_secs <= 0:
            raise ValueError(f"refit_every_secs must be > 0, got {refit_every_secs}")
        self._clock = clock
        self._model_factory = model_factory
        self._offload = offload
        self._ahead = ahead  # replay: told of every fit, to plan the next ones (regime.fit_ahead)
        self.refit_every_secs = refit_every_secs
        self._models: dict[str, RegimeModel] = {}
        self._fitted_at_secs: dict[str, float] = {}  # clock monotonic reading of the last good fit
        self._reports: dict[str, FitReport] = {}
        self._current: dict[str, CryptoRegime] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def on_4h_close(self, ticker: str, frame: pd.DataFrame) -> CryptoRegime:
        """Refit ``ticker``'s model if due (in a worker thread), then predict from ``frame``."""
        lock = self._locks.setdefault(ticker, asyncio.Lock())
        async with lock:
            model = self._models.get(ticker)
            if model is None:
                model = self._models[ticker] = self._model_factory()
            if self.refit_due(ticker):
                await self._refit(ticker, model, frame)
            regime = model.predict(frame)
            self._current[ticker] = regime
            return regime

    def refit_due(self, ticker: str) -> bool:
        fitted_at = self._fitted_at_secs.get(ticker)
        if fitted_at is None:
            return True
        return self._clock.monotonic_secs() - fitted_at >= self.refit_every_secs

    def current(self, ticker: str) -> CryptoRegime:
        """The regime from the latest 4h close (unknown, with the reason, before the first one)."""
        regime = self._current.get(ticker)
        if regime is None:
            return CryptoRegime.unknown(f"no 4h close of {ticker} processed yet")
        return regime

    def last_fit(self, ticker: str) -> FitReport | None:
        return self._reports.get(ticker)

    async def _refit(self, ticker: str, model: RegimeModel, frame: pd.DataFrame) -> None:
        started_secs = self._clock.monotonic_secs()
        fitted_at_ms = self._clock.now_ms()
        try:
            report = await self._offload(model.fit, frame, fitted_at_ms=fitted_at_ms)
        except asyncio.CancelledError:
            raise
        except Exception:
            # keep the previous model (if any) and try again at the next close
            log.exception("%s regime fit raised; keeping the previous model", ticker)
            return
        self._reports[ticker] = report
        if self._ahead is not None:
            self._ahead.after_fit(ticker, fitted_at_ms, report.fitted)
        if report.fitted:
            self._fitted_at_secs[ticker] = started_secs
            log.info(
                "%s regime model fitted: %s states on %d rows",
                ticker,
                report.chosen_n_states,
                report.n_rows,
            )
        else:
            log.warning("%s regime model not fitted: %s", ticker, report.reason)


__all__ = [
    "DEFAULT_REFIT_EVERY_SECS",
    "CryptoRegimeTracker",
    "FitPlanner",
    "Offload",
    "RegimeModel",
    "run_inline",
]
