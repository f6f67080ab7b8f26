"""Regime fits computed ahead, in a process pool, when the future candles are known (replay).

A refit depends only on the 4h candles the history holds at the refit's 4h close and on the HMM
settings, and replay knows both in advance: the recording holds the candles and the tracker's rule
(the first 4h close at least ``refit_every`` after the last good fit) gives the instants. So after
each fit the tracker tells ``FitAhead`` (``after_fit``), which plans that ticker's next ``depth``
refits and submits ``fit_hmm`` on their frames to a ``regime.fit_pool.FitPool`` (the other
cores). When the model then fits, it asks ``take`` first: a finished (or running: it waits) fit of
exactly the same candles and settings is used, stamped with the real instant (``hmm_fit.stamp``);
anything else, a planned frame that turned out different included, is fitted then, by the same
pool (so the replay's own process never imports scikit-learn). The
frames are compared by a SHA-256 of their bytes, so a planning mistake costs time, never a
different result: journals are byte-identical to sequential fits.

A planned fit the disk cache (``regime.fit_cache``) already holds for that frame and instant is not
submitted: the model will load it from there and never ask the pool, so fitting it again only took
a core from the replay (a warm week's every pooled fit was such a waste).

The daemon itself never sees a future candle: the planner reads the recording, the daemon's model
only ever receives results for the frame it holds.
"""

from __future__ import annotations

import hashlib
import logging
import multiprocessing
import os
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Protocol

import pandas as pd

from regime.config import CryptoHmmConfig
from regime.fit_cache import FitCache, candle_bytes
from regime.fit_pool import FitPool
from regime.hmm_types import FitResult

log = logging.getLogger(__name__)

DEFAULT_DEPTH = 2  # refits planned ahead per ticker: a day's fits queue behind the next day's


class FutureFrames(Protocol):
    """What the planner needs to know of the future (``runner.replay.fit_frames``)."""

    def close_times_ms(self, ticker: str, from_ms: int) -> Iterator[int]:
        """Clock instants at which the daemon will observe ``ticker``'s 4h closes, from
        ``from_ms`` on, ascending."""
        ...

    def frame_at(self, ticker: str, now_ms: int) -> pd.DataFrame:
        """The 4h history frame the daemon will hold for ``ticker`` at ``now_ms``."""
        ...


def frame_key(frame: pd.DataFrame) -> str:
    """The frame's candles as a digest (open times and OHLCV bytes, as ``FitCache.key``)."""
    return hashlib.sha256(candle_bytes(frame)).hexdigest()


def default_workers() -> int:
    """All cores but the one the replay's event loop runs on; none inside a daemonic process (a
    Dask worker: it may not start children, and a sweep already fills the cores)."""
    if multiprocessing.current_process().daemon:
        return 0
    return max(1, (os.cpu_count() or 1) - 1)


@dataclass
class FitAheadStats:
    submitted: int = 0
    hits: int = 0  # fits the model took from the pool
    misses: int = 0  # fits the model made itself (nothing planned for that frame)
    failed: int = 0  # pool fits that raised (fitted inline instead)
    dropped: int = 0  # planned fits no refit asked for
    cached: int = 0  # planned fits not submitted: the disk cache holds them


@dataclass
class _Planned:
    key: str
    at_ms: int
    future: Future[FitResult]


@dataclass
class FitAhead:
    config: CryptoHmmConfig
    frames: FutureFrames
    refit_every_ms: int
    workers: int
    depth: int = DEFAULT_DEPTH
    stats: FitAheadStats = field(default_factory=FitAheadStats)
    pool: FitPool | None = None  # None: its own, of ``workers`` processes
    cache: FitCache | None = None  # the model's disk cache: what it holds is not fitted again
    _planned: dict[str, list[_Planned]] = field(default_factory=dict)  # by ticker

    def __post_init__(self) -> None:
        if self.pool is None and self.workers > 0:
            self.pool = FitPool(self.workers)

    @property
    def active(self) -> bool:
        # a warm-started fit needs the previous one's result: nothing to compute ahead
        return self.workers > 0 and not self.config.warm_start

    def after_fit(self, ticker: str, fitted_at_ms: int, fitted: bool) -> None:
        """The tracker fitted ``ticker`` at ``fitted_at_ms``: plan its next refits."""
        if not self.active or not fitted:
            return  # an unfitted model is refitted at the next close: cheap, and not plannable
        wanted = self._schedule(ticker, fitted_at_ms)
        kept: list[_Planned] = []
        for planned in self._planned.get(ticker, []):
            if planned.at_ms in wanted:
                kept.append(planned)
            else:
                planned.future.cancel()
                self.stats.dropped += 1
        have = {planned.at_ms for planned in kept}
        for at_ms in wanted:
            if at_ms not in have:
                kept.extend(self._submit(ticker, at_ms))
        self._planned[ticker] = kept

    def _submit(self, ticker: str, at_ms: int) -> list[_Planned]:
        """The fit planned at ``at_ms``, or none when the disk cache holds it already."""
        frame = self.frames.frame_at(ticker, at_ms)
        if self._is_cached(frame):
            self.stats.cached += 1
            return []
        assert self.pool is not None  # active
        future = self.pool.submit(self.config, frame)
        self.stats.submitted += 1
        return [_Planned(frame_key(frame), at_ms, future)]

    def _is_cached(self, frame: pd.DataFrame) -> bool:
        # the key a cold fit of this frame is stored under, whatever its instant (the model's
        # ``_fit_or_cached``; fits planned here are never warm-started)
        if self.cache is None:
            return False
        return self.cache.contains(self.cache.key(frame, self.config.model_dump_json()))

    def take(self, config: CryptoHmmConfig, frame: pd.DataFrame) -> FitResult | None:
        """The unstamped fit of exactly ``frame`` under ``config`` if one was planned (waiting
        for it if it is still running), else None."""
        if not self.active or config != self.config:
            return None
        key = frame_key(frame)
        for planned_list in self._planned.values():
            for planned in planned_list:
                if planned.key == key:
                    planned_list.remove(planned)
                    return self._result(planned)
        self.stats.misses += 1
        return None

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()

    def _result(self, planned: _Planned) -> FitResult | None:
        try:
            result = planned.future.result()  # blocks the (virtual-time) loop: a fit is due now
        except Exception as exc:  # a broken worker costs the inline fit, nothing else
            log.warning("regime fit ahead failed (%s); fitting inline", exc)
            self.stats.failed += 1
            return None
        self.stats.hits += 1
        return result

    def _schedule(self, ticker: str, fitted_at_ms: int) -> list[int]:
        """The instants of the next ``depth`` refits if every one succeeds."""
        wanted: list[int] = []
        last = fitted_at_ms
        for _ in range(self.depth):
            due = next(self.frames.close_times_ms(ticker, last + self.refit_every_ms), None)
            if due is None:
                break
            wanted.append(due)
            last = due
        return wanted


__all__ = ["FitAhead", "FitAheadStats", "FutureFrames", "default_workers", "frame_key"]
