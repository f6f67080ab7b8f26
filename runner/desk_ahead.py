"""Replay's analysts in a worker process, off the replay's critical path.

A decision's analysts (``AnalystDesk.roll`` then ``observe``, ``agent.decision_context``) only
write: ``observe`` writes reports (reading only the analysts' own newest reports) and ``roll``,
once a UTC day, summarises earlier days' reports. A decision reads only the summaries
(``AnalystDesk.summaries_for``, the pre_open view, which only a roll changes). So ``DeskAhead``
queues each decision's snapshot (its JSON, already made for the journal) for a worker process
that owns its own ``AnalystDesk`` over the same analysts.db and observes them in order, a batch
at a time; when a roll is due it sends what is queued and the roll and waits for the worker (so
the summaries are committed before this process reads them through its own connection), and at
shutdown (``flush``) it sends what is queued and a commit and waits. The first roll, due before
any decision was sent, is made here instead: the worker would only read what this store reads,
and is still starting. The worker's desk sees the
same calls in the same order as an inline desk, on the same connection kind, so analysts.db and
the summaries are the same; its store commits only when told (a roll, a flush).

The worker decodes the snapshot's JSON instead of being sent the mapping: the snapshot as sent
is plain JSON (``model_dump(mode="json")``, rounded), which orjson gives back with the same
types (int stays int, float the same float, lists as lists), and the report builders
(``memory.analyst_reports``) never depend on key order (orjson sorts keys) nor on a list being
a tuple, and read a non-finite number where they expect one as they read null (orjson writes a
NaN as null). The byte-identical replays and ``tests/unit/test_desk_ahead.py`` check it.

Failures: an observe or a roll that raises in the worker is logged here (once its batch is
back, at the latest at the next roll), and the decision goes on without analysts, as inline; a
roll that raises makes ``roll`` raise here, so that decision's observe is skipped, as inline. A
worker that dies (or a pool that cannot start it) is not a replay failure: the desk carries on
inline, in this process, after observing again here every decision sent since the worker's last
commit (its uncommitted transaction died with it; a roll's commit whose reply was lost shows in
SQLite's data_version), so nothing is lost; a warning says how many decisions it observed again.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import sys
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Final, NamedTuple

import orjson

from core.child_process import spawn_pool
from core.clock import utc_minute
from memory.analyst_model import AnalystReport, DaySummary
from memory.analyst_store import AnalystStore
from memory.analyst_summary import learn_wording
from memory.analysts import AnalystDesk

log = logging.getLogger(__name__)

#: a shorter replay runs its analysts in its own process. Measured 2026-11-28 (3 tickers, memory
#: ON, a busy host): the worker saved the replay about 0.24 s of CPU a simulated day and cost about
#: 0.6 s to start plus the replay's wait for it at the first roll; a one-day replay took 2.2-2.6 s
#: with it and 1.7-1.8 s without, a two-day one 6.1 s against 4.3-4.6 s
MIN_DESK_DAYS: Final = 7.0

#: decisions queued before a batch goes to the worker. A job costs the replay ~70 us to send;
#: a roll waits for the worker to observe what is queued: 16 costs both well under 20 us a decision
DEFAULT_BATCH: Final = 16


class DeskSource(NamedTuple):
    """What a worker needs to open the same desk (it does, once, and keeps it)."""

    db_path: str
    tickers: tuple[str, ...]


#: (at_ms, the snapshot as sent, in JSON): one decision's observe
Observed = tuple[int, bytes]


class DeskJob(NamedTuple):
    source: DeskSource
    observed: tuple[Observed, ...]  # in order
    roll_at_ms: int | None  # then the roll due at this instant (and a commit)
    commit: bool  # then a commit


class DeskReply(NamedTuple):
    errors: tuple[tuple[int, str], ...]  # (at_ms, traceback) of each observe or roll that raised
    rolled_day: str | None  # the worker desk's, after the job
    made: tuple[DaySummary, ...]  # what the roll made
    roll_failed: bool
    committed: bool  # the worker committed at the end of the job


#: the worker's desk and the loop its rolls run on; one at a time (a worker serves one replay)
_opened: dict[DeskSource, tuple[AnalystDesk, asyncio.AbstractEventLoop]] = {}


def open_desk(source: DeskSource) -> tuple[AnalystDesk, asyncio.AbstractEventLoop]:
    """Runs in the worker: its desk for ``source``, opened at the first call. Its store commits
    only when told (a roll, a commit): what the replay has not been told is committed may be
    observed again by the replay if the worker dies."""
    opened = _opened.get(source)
    if opened is None:
        for desk, loop in _opened.values():
            desk.store.close()
            loop.close()
        _opened.clear()
        store = AnalystStore(source.db_path, durable=False, batch_reports=sys.maxsize)
        opened = _opened[source] = (AnalystDesk(store, source.tickers), asyncio.new_event_loop())
    return opened


def run_desk_job(job: DeskJob) -> DeskReply:
    """Runs in the worker: the job's observes, then its roll and commit. Between rolls it also
    tokenises the reports written, for the roll the replay will wait for (most of its time)."""
    desk, loop = open_desk(job.source)
    errors = []
    written = []
    for at_ms, encoded in job.observed:
        try:
            written += desk.observe(orjson.loads(encoded), at_ms)
        except Exception:
            errors.append((at_ms, traceback.format_exc()))
    if job.roll_at_ms is None:  # while the replay goes on: the next roll will read them
        learn_wording(written)
    made: list[DaySummary] = []
    failed = False
    if job.roll_at_ms is not None:
        try:
            made = loop.run_until_complete(desk.roll(job.roll_at_ms))
        except Exception:
            errors.append((job.roll_at_ms, traceback.format_exc()))
            failed = True  # what it wrote is committed below: inline, it would be read
    commit = job.roll_at_ms is not None or job.commit
    if commit:
        desk.flush()
    return DeskReply(tuple(errors), desk.rolled_day, tuple(made), failed, commit)


def open_desk_pool(days: float) -> ProcessPoolExecutor | None:
    """The one-process pool ``DeskAhead`` runs on (its process starts at the first job), or
    None when the analysts are better run inline: for a replay of fewer than ``MIN_DESK_DAYS``
    simulated ``days``, on one core, or inside a daemonic process (a Dask sweep worker may not
    start children)."""
    if days < MIN_DESK_DAYS:
        log.info("replay analysts: run in the replay's process (%g days: a short replay)", days)
        return None
    if multiprocessing.current_process().daemon or (os.cpu_count() or 1) < 2:
        log.info("replay analysts: run in the replay's process (one core, or a daemonic process)")
        return None
    return spawn_pool(1)


class AnalystsFailed(RuntimeError):
    """A roll raised in the analysts' process (its traceback is in the message)."""


class DeskAhead(AnalystDesk):
    """An ``AnalystDesk`` whose observes and rolls run in ``pool``'s process on its own desk
    over ``store``'s database; this one reads the summaries. No model summariser: a model's
    summaries stay in the daemon's process."""

    def __init__(
        self,
        store: AnalystStore,
        db_path: str,
        tickers: Sequence[str],
        pool: Executor,
        *,
        batch: int = DEFAULT_BATCH,
    ) -> None:
        super().__init__(store, tickers)
        self._pool = pool
        self._source = DeskSource(db_path, self.tickers)
        self._batch = batch
        self._queued: list[Observed] = []
        self._sent: list[Observed] = []  # sent since the worker's last commit
        self._seen_commits = store.data_version()  # as of the worker's last commit known here
        self._running: list[Future[DeskReply]] = []  # in order
        self.unavailable: str | None = None  # why the desk now runs inline
        self.waits: list[float] = []  # seconds each roll and flush waited for the worker
        self._submit(DeskJob(self._source, (), None, False))  # the worker opens the store now

    def observe(
        self,
        sent: Mapping[str, Any],
        at_ms: int,
        encoded: Callable[[], bytes] | None = None,
    ) -> list[AnalystReport]:
        """Queued for the worker (nothing written yet: an empty list)."""
        if self.unavailable is not None:
            return super().observe(sent, at_ms)
        self._queued.append((at_ms, encoded() if encoded is not None else orjson.dumps(sent)))
        if len(self._queued) >= self._batch:
            self._send(None, commit=False)
        return []

    async def roll(self, now_ms: int) -> list[DaySummary]:
        if self.unavailable is not None or not self.roll_due(now_ms):
            return await super().roll(now_ms)
        if self._rolled_day is None and not (self._sent or self._queued):
            # the first roll, before any decision went to the worker: it would only read what
            # was committed before this desk opened, as this store does, and the replay's first
            # decision waited for the worker's start (its imports: 1-6 s) to be told so. Made
            # here; the worker's desk rolls from the next day on, as it would have then
            return await super().roll(now_ms)
        reply = self._send(now_ms, commit=True)
        if reply is None:  # the worker is gone: the decisions it lost are observed again
            return await super().roll(now_ms)
        if reply.rolled_day != self._rolled_day:
            self._rolled_day = reply.rolled_day
            self._views.clear()
        if reply.roll_failed:
            raise AnalystsFailed(
                f"the roll at {utc_minute(now_ms)} failed in the analysts' process"
            )
        return list(reply.made)

    def flush(self) -> None:
        if self.unavailable is None and (self._queued or self._sent or self._running):
            self._send(None, commit=True)
        super().flush()
        if self.waits:
            log.info(
                "replay analysts: %d waits for their process, %.3f s in all (the first %.3f s)",
                len(self.waits),
                sum(self.waits),
                self.waits[0],
            )

    def _send(self, roll_at_ms: int | None, *, commit: bool) -> DeskReply | None:
        """What is queued (and a roll or a commit) to the worker; with either, wait for every
        job sent and return the last reply (None: the worker is gone, the desk runs inline)."""
        observed, self._queued = self._queued, []
        self._sent.extend(observed)
        future = self._submit(DeskJob(self._source, tuple(observed), roll_at_ms, commit))
        if future is None:
            return None
        waiting = roll_at_ms is not None or commit
        started = time.perf_counter()
        reply = self._collect(wait=waiting)
        if waiting:
            self.waits.append(time.perf_counter() - started)
        if waiting and reply is None and self.unavailable is None:
            # the job itself raised (logged): taken as a failed roll, nothing known committed
            return DeskReply((), self._rolled_day, (), True, False)
        if reply is not None and reply.committed:
            self._sent.clear()
            self._seen_commits = self.store.data_version()
        return reply

    def _submit(self, job: DeskJob) -> Future[DeskReply] | None:
        try:
            future = self._pool.submit(run_desk_job, job)
        except (OSError, RuntimeError) as exc:  # BrokenProcessPool is a RuntimeError
            self._go_inline(exc)
            return None
        self._running.append(future)
        return future

    def _collect(self, *, wait: bool) -> DeskReply | None:
        """Log the errors of the jobs done (of every job, ``wait``); the last job's reply (None
        when it raised or the worker is gone)."""
        reply = None
        while self._running and (wait or self._running[0].done()):
            future = self._running.pop(0)
            reply = None
            try:
                reply = future.result()
            except BrokenProcessPool as exc:
                self._go_inline(exc)
                return None
            except Exception:
                log.exception("analysts failed in the analysts' process: a batch went without")
                continue
            for at_ms, text in reply.errors:
                log.error(
                    "analysts failed for the decision at %s (in the analysts' process); "
                    "the prompt went without them\n%s",
                    utc_minute(at_ms),
                    text.rstrip(),
                )
        return reply

    def _go_inline(self, exc: BaseException) -> None:
        """The worker is gone: observe again here what it had not committed, and carry on here.
        It commits only in a roll or flush job, which this desk waits for (so it is the last job
        sent): a commit not known here is that job's, taking every decision sent before."""
        committed = self.store.data_version() != self._seen_commits
        lost = self._queued if committed else self._sent + self._queued
        self.unavailable = str(exc) or type(exc).__name__
        self._running.clear()
        self._sent, self._queued = [], []
        log.warning(
            "replay analysts: the analysts' process is gone (%s); running them in the replay's "
            "process from now on, after observing again the %d decision(s) it had not committed",
            self.unavailable,
            len(lost),
        )
        for at_ms, encoded in lost:
            try:
                super().observe(orjson.loads(encoded), at_ms)
            except Exception:
                log.exception("analysts failed for the decision at %s", utc_minute(at_ms))


__all__ = [
    "DEFAULT_BATCH",
    "MIN_DESK_DAYS",
    "AnalystsFailed",
    "DeskAhead",
    "DeskJob",
    "DeskReply",
    "DeskSource",
    "open_desk",
    "open_desk_pool",
    "run_desk_job",
]
