"""Replay's tick rows computed ahead, in a worker process, off the replay's critical path.

``RecordedTicks`` publishes every stream's update at every grid instant; finding the kline
(``SimFeed.kline_state``) and rounding it as on the wire (``sim.tick_rows.kline_row``) was about
three quarters of its cost per tick, and depends only on the recording. So ``RowsAhead`` has one
worker process compute those rows (``sim.tick_rows.instant_rows``, the function the direct path
runs) a chunk of simulated time at a time (a day by default), a few chunks ahead of the instant
being published; the replay's process only turns each row into a ``MarketTick`` and publishes it,
in the same order. The worker opens its own ``SimFeed`` on the same data dir, base bar, update
interval and tickers (``FeedSource``), once; rows are plain ints, floats and bools, which pickle
exactly, so the ticks are the ones the direct path makes.

Until the worker has delivered its first chunk (it is starting: a Python process, numpy and
pandas, the recording), instants whose chunk is not ready are computed directly instead of waited
for; after that the replay waits for a late chunk (the worker is many times faster than the replay,
so it is late only when starved of CPU). Either way the ticks are the same.

An exception in ``instant_rows`` raises where the rows are taken: it is a bug, as on the direct
path. A worker that is gone (killed: the OOM killer, a person's ``kill``; ``BrokenExecutor``) or a
pool that cannot start a process (``OSError`` on submit) makes ``RowsAhead`` give up, with one
warning; ``RecordedTicks`` then computes the rows itself, the same rows, so the replay goes on
unchanged but slower. (Raising instead made the market loop crash at every restart: a replay of
tens of thousands of crashes and no ticks.)
"""

from __future__ import annotations

import logging
import multiprocessing
import os
from collections.abc import Sequence
from concurrent import futures
from concurrent.futures import BrokenExecutor, Executor, Future, ProcessPoolExecutor
from pathlib import Path
from typing import Final, NamedTuple

from core.child_process import spawn_pool
from core.clock import DAY_MS
from sim.feed import SimFeed
from sim.tick_rows import ROW_WIDTH, Rows, StreamKey, instant_rows

log = logging.getLogger(__name__)

#: below this many ticks a replay computes its rows itself: the worker's start (a Python process,
#: numpy, pandas, the recording) costs about 2.5 s of CPU, and the rows it takes off the replay
#: cost 5-8 us a tick there (measured 2026-11-28), so 100,000 ticks (about 10 days of 3 tickers at
#: the replay's four updates a 5m bar) are about 0.5-0.8 s of the replay's time. A one-day replay
#: ran as fast without it and its process used 1.6-2 s less CPU in all, which a busy machine (a
#: test suite, a sweep) pays in full
MIN_TICKS_AHEAD: Final = 100_000

#: chunks queued behind the one being published; the worker makes a day's rows in tens of ms,
#: the replay publishes them in about half a second, so two would do: three absorb a slow start
DEFAULT_DEPTH: Final = 3


class FeedSource(NamedTuple):
    """What a worker needs to open the same ``SimFeed`` (it does, once, and keeps it)."""

    tickers: tuple[str, ...]
    data_dir: Path | None
    update_interval_ms: int
    base_interval: str
    window: tuple[int, int] | None = None

    @classmethod
    def of(cls, feed: SimFeed) -> FeedSource:
        return cls(
            feed.tickers, feed.data_dir, feed.update_interval_ms, feed.base_interval, feed.window
        )

    def open(self) -> SimFeed:
        return SimFeed(
            self.tickers,
            data_dir=self.data_dir,
            update_interval_ms=self.update_interval_ms,
            base_interval=self.base_interval,
            window=self.window,
        )


class ChunkJob(NamedTuple):
    source: FeedSource
    streams: tuple[StreamKey, ...]
    first_ms: int
    instants: int  # how many, ``update_interval_ms`` apart


#: the worker's open feed; one at a time (a worker serves one replay)
_opened: dict[FeedSource, SimFeed] = {}


def open_feed(source: FeedSource) -> SimFeed:
    """Runs in the worker: its feed for ``source``, opened at the first call."""
    feed = _opened.get(source)
    if feed is None:
        _opened.clear()
        feed = _opened[source] = source.open()
    return feed


def _load(source: FeedSource) -> None:
    open_feed(source)


def chunk_rows(job: ChunkJob) -> Rows:
    """Runs in the worker: ``instant_rows`` over the job's instants on the worker's own feed."""
    feed = open_feed(job.source)
    return instant_rows(
        feed, job.streams, job.first_ms, job.instants, job.source.update_interval_ms
    )


def open_tick_pool(feed: SimFeed, ticks: int) -> ProcessPoolExecutor | None:
    """The one-process pool ``RowsAhead`` runs on, its worker started and opening ``feed``'s
    recording now (while the replay is wired and warms up, instead of when the first rows are
    due), or None when ticks are better computed inline: for a replay of fewer than
    ``MIN_TICKS_AHEAD`` ``ticks``, on one core (the worker would compete with the replay), inside
    a daemonic process (a Dask sweep worker may not start children, and its siblings fill the
    cores), or when no process can be started."""
    if ticks < MIN_TICKS_AHEAD:
        log.info("replay ticks: computed in the replay's process (%d ticks: a short replay)", ticks)
        return None
    if multiprocessing.current_process().daemon or (os.cpu_count() or 1) < 2:
        log.info("replay ticks: computed in the replay's process (one core, or a daemonic process)")
        return None
    pool = None
    try:
        pool = spawn_pool(1)
        pool.submit(_load, FeedSource.of(feed))  # its failure shows again on the first rows
    except OSError as exc:
        log.warning("replay ticks: no worker process (%s); computing them inline", exc)
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
        return None
    return pool


class RowsAhead:
    """Every grid instant's rows up to ``stop_ms``, computed on ``executor`` a few chunks ahead.

    ``rows_at`` must be asked for instants in increasing order (a replay's clock only moves
    forward); instants it skips cost nothing but their chunk's share of the worker's time."""

    def __init__(
        self,
        executor: Executor,
        feed: SimFeed,
        streams: Sequence[StreamKey],
        stop_ms: int,
        *,
        chunk_ms: int = DAY_MS,
        depth: int = DEFAULT_DEPTH,
    ) -> None:
        interval_ms = feed.update_interval_ms
        if chunk_ms <= 0 or chunk_ms % interval_ms:
            raise ValueError(f"chunk_ms must be a multiple of {interval_ms}, got {chunk_ms}")
        if depth < 0:
            raise ValueError(f"depth must be >= 0, got {depth}")
        self._executor = executor
        self._source = FeedSource.of(feed)
        self._streams = tuple(streams)
        self._width = len(self._streams) * ROW_WIDTH  # values per instant
        self._interval_ms = interval_ms
        self._stop_ms = stop_ms
        self._chunk_ms = chunk_ms
        self._depth = depth
        self._pending: dict[int, Future[Rows]] = {}  # by chunk index
        self._rows: Rows = []  # the chunk being published: [first_ms, end_ms)
        self._first_ms = 0
        self._end_ms = 0
        self._started = False  # the worker has delivered a chunk
        self.unavailable: str | None = None  # why rows are no longer computed ahead

    def prefetch(self, from_ms: int, *, wait: bool = False) -> None:
        """Submit the chunks from ``from_ms`` on now; ``wait``: return once the first is done
        (or failed), so every instant is taken from the worker (tests)."""
        index = from_ms // self._chunk_ms
        if self.unavailable is None and self._submit_from(index) and wait:
            futures.wait([self._pending[k] for k in (index,) if k in self._pending])

    def rows_at(self, event_ms: int) -> tuple[Rows, int] | None:
        """(rows, offset): the streams' rows at ``event_ms`` start at ``rows[offset]``, in
        ``instant_rows``' layout; None when the worker is unavailable (compute them directly)."""
        if self._first_ms <= event_ms < self._end_ms:
            return self._rows, (event_ms - self._first_ms) // self._interval_ms * self._width
        if self.unavailable is not None:
            return None
        index = event_ms // self._chunk_ms
        for stale in [k for k in self._pending if k < index]:
            self._pending.pop(stale).cancel()
        if not self._submit_from(index) or index not in self._pending:
            return None
        if not self._started and not self._pending[index].done():
            return None  # the worker is starting: compute this instant here rather than wait
        # blocks the (virtual-time) loop only when the worker is behind; its failure raises here
        try:
            self._rows = self._pending.pop(index).result()
        except BrokenExecutor as exc:
            self._give_up("the worker process is gone", exc)
            return None
        self._started = True
        self._first_ms = index * self._chunk_ms
        self._end_ms = self._first_ms + len(self._rows) // self._width * self._interval_ms
        return self._rows, (event_ms - self._first_ms) // self._interval_ms * self._width

    def _submit_from(self, index: int) -> bool:
        """Chunks ``index .. index + depth`` (up to ``stop_ms``) submitted; False if the pool
        cannot start a process or its process is gone."""
        try:
            for k in range(index, index + self._depth + 1):
                first_ms = k * self._chunk_ms
                if first_ms > self._stop_ms:
                    break
                if k not in self._pending:
                    last_ms = min(first_ms + self._chunk_ms - self._interval_ms, self._stop_ms)
                    count = (last_ms - first_ms) // self._interval_ms + 1
                    job = ChunkJob(self._source, self._streams, first_ms, count)
                    self._pending[k] = self._executor.submit(chunk_rows, job)
        except OSError as exc:
            self._give_up("the worker process cannot start", exc)
            return False
        except BrokenExecutor as exc:
            self._give_up("the worker process is gone", exc)
            return False
        return True

    def _give_up(self, why: str, exc: BaseException) -> None:
        self.unavailable = f"{why}: {exc}"
        log.warning("replay ticks: %s (%s); computing inline", why, exc)
        for future in self._pending.values():
            future.cancel()
        self._pending.clear()


__all__ = [
    "DAY_MS",
    "MIN_TICKS_AHEAD",
    "ChunkJob",
    "FeedSource",
    "RowsAhead",
    "chunk_rows",
    "open_feed",
    "open_tick_pool",
]
