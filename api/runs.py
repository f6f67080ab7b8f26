"""Replays as background jobs of the API: a bounded queue, run one at a time (by default) in a
child process, so a replay never blocks the daemon's event loop nor shares its memory.

The composition root gives the command line (``RunLauncher``: ``vigil replay`` with the run's
flags); this module owns the jobs. Every job has a folder ``<state dir>/runs/<run_id>/`` holding
the replay's own files, its output (``replay.log``) and ``job.json`` (the job's status, rewritten
at every change) so a restarted API still lists it. A job the API was running or holding when its
process stopped is listed ``failed`` with that reason: nothing is lost silently.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO, Protocol

from api.runs_models import FINISHED, RunBody, RunRequest, RunsList, RunSummary
from api.runs_summary import FILE_MAX_BYTES, read_summary
from core.regular_file import open_regular_file, read_regular_file
from state.atomic import atomic_write_bytes

log = logging.getLogger(__name__)

JOB_FILE_NAME = "job.json"
LOG_FILE_NAME = "replay.log"
RUNS_DIR_NAME = "runs"
#: a cancelled job's replay gets this long to stop in order (journals flushed, report written)
TERMINATE_GRACE_SECS = 5.0  # within the supervisor's shutdown deadline (8 s)
REASON_LINES = 3
TAIL_BYTES = 64 * 1024  # of replay.log, for its last lines
INTERRUPTED = "interrupted: the API process running it stopped before it finished"
#: what `vigil replay` exit codes mean (1: see the log's last lines, given with it)
EXIT_REASONS = {1: "stopped early or a loop failed", 78: "refused to start"}


class RunRejectedError(ValueError):
    """The request cannot run (an unknown ticker, too long a span): the client's 4xx."""


class RunsFullError(RuntimeError):
    """The queue holds as many unfinished jobs as it may: try again later (429)."""


class RunsUnwritableError(RuntimeError):
    """The job's folder or job.json cannot be written (a full disk, a file where the runs folder
    should be): nothing was queued (507)."""


class RunLauncher(Protocol):
    """How a run is started: the argv of its child process, or ``RunRejectedError``."""

    def argv(self, request: RunRequest, out_dir: Path) -> Sequence[str]: ...


@dataclass(frozen=True)
class RunLimits:
    queue_size: int = 4  # jobs waiting
    concurrency: int = 1  # jobs running at once
    max_days: int = 366  # longest span one request may ask


def _now_ms() -> int:
    return int(time.time() * 1000)  # job times are wall times (a replay's are simulated)


def _new_run_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


class RunQueue:
    def __init__(self, state_dir: Path, launcher: RunLauncher, limits: RunLimits) -> None:
        self._root = state_dir / RUNS_DIR_NAME
        self._launcher = launcher
        self._limits = limits
        self._jobs: dict[str, RunBody] = {}
        self._argv: dict[str, Sequence[str]] = {}
        self._waiting: asyncio.Queue[str] = asyncio.Queue()
        self._ended_without_folder: set[str] = set()  # removed while queued or running
        self._load()

    @property
    def capacity(self) -> int:
        return self._limits.queue_size + self._limits.concurrency

    def submit(self, request: RunRequest) -> RunBody:
        """Accept a run (``queued``) or raise ``RunRejectedError`` / ``RunsFullError``."""
        if request.days > self._limits.max_days:
            raise RunRejectedError(
                f"{request.days} days asked; one run may span at most {self._limits.max_days}"
            )
        unfinished = sum(job.status not in FINISHED for job in self._jobs.values())
        if unfinished >= self.capacity:
            raise RunsFullError(
                f"{unfinished} runs are queued or running (at most {self.capacity}): "
                "try again when one has finished"
            )
        run_id = _new_run_id()
        out_dir = self._root / run_id
        argv = list(self._launcher.argv(request, out_dir))  # may reject: before any file
        job = RunBody(
            run_id=run_id,
            status="queued",
            request=request,
            out_dir=str(out_dir),
            submitted_at_ms=_now_ms(),
        )
        # held only once written: a job kept before a failed write stayed 'queued', never ran,
        # and was counted against capacity until the API restarted
        try:
            out_dir.mkdir(parents=True)
            _write(job)
        except OSError as exc:
            with contextlib.suppress(OSError):  # an empty folder is no run: leave none
                out_dir.rmdir()
            where = exc.filename or out_dir
            raise RunsUnwritableError(
                f"{where} cannot be written ({exc.strerror or exc}): the run was not queued"
            ) from None
        self._jobs[run_id] = job
        self._argv[run_id] = argv
        self._waiting.put_nowait(run_id)
        return job

    def get(self, run_id: str) -> RunBody | None:
        job = self._jobs.get(run_id)
        return None if job is None or self._forget_if_removed(job) else job

    def listing(self) -> RunsList:
        kept = [job for job in list(self._jobs.values()) if not self._forget_if_removed(job)]
        jobs = sorted(kept, key=lambda j: j.submitted_at_ms, reverse=True)
        return RunsList(
            runs=jobs,
            queued=sum(j.status == "queued" for j in jobs),
            running=sum(j.status == "running" for j in jobs),
            capacity=self.capacity,
        )

    def _forget_if_removed(self, job: RunBody) -> bool:
        """A finished run whose folder a person removed (how a run is deleted) is forgotten, and
        said once: it was listed as done until the API restarted, its report gone."""
        if job.status not in FINISHED or job.run_id in self._ended_without_folder:
            return False  # one removed before it ended stays, failed with that reason
        if Path(job.out_dir).is_dir():
            return False
        del self._jobs[job.run_id]
        log.info("run %s: its folder %s was removed; the run is forgotten", job.run_id, job.out_dir)
        return True

    async def run(self) -> None:
        """The workers (a supervised loop): take jobs in order, ``concurrency`` at a time."""
        async with asyncio.TaskGroup() as group:
            for n in range(self._limits.concurrency):
                group.create_task(self._worker(), name=f"runs worker {n}")

    async def _worker(self) -> None:
        while True:
            run_id = await self._waiting.get()
            try:
                await self._run_job(run_id)
            except asyncio.CancelledError:
                self._finish(run_id, "failed", None, INTERRUPTED)
                raise
            except Exception as exc:  # a job's failure is the job's, never the loop's
                log.exception("run %s failed to run", run_id)
                self._finish(run_id, "failed", None, f"{type(exc).__name__}: {exc}")

    async def _run_job(self, run_id: str) -> None:
        job = self._jobs[run_id]
        out_dir = Path(job.out_dir)
        running = job.model_copy(update={"status": "running", "started_at_ms": _now_ms()})
        self._jobs[run_id] = running
        refusal = _planted(out_dir) or _started(running)
        if refusal:
            self._finish(run_id, "failed", None, refusal)
            log.warning("run %s failed: %s", run_id, refusal)
            return
        log.info("run %s started: %s", run_id, job.request.model_dump_json(by_alias=True))
        with _new_log(out_dir / LOG_FILE_NAME) as output:
            child = await asyncio.create_subprocess_exec(
                *self._argv.pop(run_id),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=output,
                stderr=asyncio.subprocess.STDOUT,
            )
            try:
                code = await child.wait()
            except asyncio.CancelledError:
                await _stop(child)
                raise
        # off the loop, which is the daemon's: a report.json of a year's replay (about 26 MB)
        # took 1.1-1.2 s to read and check, a second of ticks and stops not handled
        read = await asyncio.to_thread(read_summary, out_dir)
        if code == 0:
            self._finish(run_id, "done", code, None, read)
        else:
            why = EXIT_REASONS.get(code, f"exit code {code}")
            self._finish(run_id, "failed", code, f"{why}: {_tail(out_dir / LOG_FILE_NAME)}", read)
        log.info("run %s %s", run_id, self._jobs[run_id].status)

    def _finish(
        self,
        run_id: str,
        state: str,
        code: int | None,
        reason: str | None,
        read: tuple[RunSummary | None, str] | None = None,
    ) -> None:
        """``read``: ``read_summary`` of the job's folder, read here when not given (a job that
        did not run to its end: its folder holds no report, or it is the API's start or stop)."""
        job = self._jobs[run_id]
        if not Path(job.out_dir).is_dir():
            self._ended_without_folder.add(run_id)
        summary, missing = read if read is not None else read_summary(Path(job.out_dir))
        update = {
            "status": state,
            "finished_at_ms": _now_ms(),
            "exit_code": code,
            "reason": reason,
            "summary": summary,
            "unavailable": {} if summary is not None else {"summary": missing},
        }
        finished = job.model_copy(update=update)
        self._jobs[run_id] = finished
        self._argv.pop(run_id, None)
        try:
            _write(finished)
        except OSError as exc:  # never the loop's end (nor the start's): the API still says it
            log.warning(
                "run %s is %s but its %s cannot be written: %s",
                run_id, state, JOB_FILE_NAME, exc,
            )  # fmt: skip

    def _load(self) -> None:
        """Jobs of earlier API processes; the unfinished ones died with them."""
        if not self._root.is_dir():
            return
        for path in sorted(self._root.glob(f"*/{JOB_FILE_NAME}")):
            try:
                # a FIFO there waited for a writer (the API never started); a huge one was read whole
                data = read_regular_file(path, max_bytes=FILE_MAX_BYTES)[1]
                job = RunBody.model_validate_json(data)
            except (OSError, ValueError) as exc:
                log.warning("skipping %s: %s", path, exc)
                continue
            # a job is its folder: a copied folder repeats another's run_id, and a state dir
            # mounted elsewhere (or an edit) leaves out_dir naming a folder that is not this one
            folder = path.parent
            if job.run_id != folder.name:
                log.warning("skipping %s: its run_id %r is not its folder's", path, job.run_id)
                continue
            if job.out_dir != str(folder):
                log.info(
                    "run %s: its folder is now %s (job.json said %s)",
                    job.run_id,
                    folder,
                    job.out_dir,
                )
                job = job.model_copy(update={"out_dir": str(folder)})
            self._jobs[job.run_id] = job
            if job.status not in FINISHED:
                self._finish(job.run_id, "failed", job.exit_code, INTERRUPTED)


async def _stop(child: asyncio.subprocess.Process) -> None:
    """SIGTERM (the replay stops in order and writes its report), then SIGKILL."""
    with contextlib.suppress(ProcessLookupError):
        child.terminate()
    try:
        await asyncio.wait_for(child.wait(), TERMINATE_GRACE_SECS)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            child.kill()
        await child.wait()


def _write(job: RunBody) -> None:
    # a fresh temporary name (O_EXCL): a fixed one (job.tmp) planted as a symlink was written
    # through, and as a FIFO held the event loop; not durable, as the plain rename was not
    data = (job.model_dump_json(by_alias=True, indent=2) + "\n").encode()
    atomic_write_bytes(Path(job.out_dir) / JOB_FILE_NAME, data, durable=False)


def _started(job: RunBody) -> str | None:
    """Why the job's ``running`` status cannot be saved, or None once it is: its OSError went to
    the worker's catch-all, a traceback in the log for a full disk."""
    try:
        _write(job)
    except OSError as exc:
        where = Path(job.out_dir) / JOB_FILE_NAME
        return f"{where} cannot be written ({exc.strerror or exc}): the replay was not run"
    return None


def _planted(out_dir: Path) -> str | None:
    """Why the job must not run, or None: the API made its folder for it alone, holding only
    job.json, so anything else was put there while it was queued, and the replay went through it
    (a ``logs`` link sent the run's journals to the folder it named)."""
    try:
        with os.scandir(out_dir) as entries:
            names = [entry.name for entry in entries if entry.name != JOB_FILE_NAME]
    except FileNotFoundError:  # a person's way to take a run off the queue: there is no cancel
        return f"{out_dir} was removed while the run was queued: the replay was not run"
    except OSError as exc:
        return f"{out_dir} cannot be listed ({exc.strerror or exc})"
    if not names:
        return None
    shown = ", ".join(repr(name) for name in sorted(names)[:5])
    return f"{out_dir} holds {shown}, which the API did not put there: the replay was not run"


def _new_log(path: Path) -> BinaryIO:
    """The child's output file, made here (a job runs once in its own new folder): whatever is
    there already was put there, and was written through (a symlink) or waited on (a FIFO)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    return os.fdopen(os.open(path, flags, 0o666), "wb")


def _tail(path: Path) -> str:
    """The last lines the child wrote: the replay's own words for why it stopped. Only the log's
    end is read: read whole, a log of 2 GB took all of the machine's memory, on the event loop."""
    try:
        with open_regular_file(path) as log_file:
            start = max(0, log_file.seek(0, os.SEEK_END) - TAIL_BYTES)
            log_file.seek(start)
            lines = log_file.read().decode("utf-8", errors="replace").splitlines()
    except OSError as exc:
        return f"its output cannot be read: {exc}"
    if start > 0:
        lines = lines[1:]  # the first may be cut
    kept = [line.strip() for line in lines if line.strip()][-REASON_LINES:]
    return " | ".join(kept) or "it wrote nothing"


__all__ = [
    "JOB_FILE_NAME",
    "LOG_FILE_NAME",
    "RUNS_DIR_NAME",
    "RunLauncher",
    "RunLimits",
    "RunQueue",
    "RunRejectedError",
    "RunsFullError",
    "RunsUnwritableError",
]
