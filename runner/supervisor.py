"""The supervisor: runs the daemon's loops in one TaskGroup, restarts the ones that fail, stops in order.

A loop is a coroutine factory that should run until cancelled. If it raises (or returns), the failure is
logged with its traceback, published as ``LoopFailed``, and the loop restarts after a capped, jittered
exponential backoff on the daemon's clock. The attempt counter resets once a loop has stayed up for the
backoff cap, so a loop that fails once a week restarts quickly every time.

``request_stop`` (wired to SIGTERM/SIGINT) stops the loops one by one in the order they were given
(input first: nothing new arrives while the rest wind down), then runs the shutdown hooks (flush
journals, save state) in order. A loop marked ``stop_early`` (one that winds down a child process
with a grace of its own: the API process, API-asked replays) is cancelled first, and winds down
beside the ordered ones, so that its grace does not add to theirs. The whole stop has a deadline
in *real* seconds: it exists to finish before the container runtime's own kill timer, which runs
on real time whatever the daemon's clock is.
The deadline is enforced: a loop that swallows its cancellation is abandoned and reported stuck, and
the hooks run anyway.

``run(start=...)`` first runs a start phase (warm-up, reconcile with the exchange): a stop requested
during it cancels it, the loops never start, and the hooks still run (state saved).
"""

from __future__ import annotations

import asyncio
import enum
import inspect
import logging
import random
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from core.backoff import Backoff
from core.bus import EventBus
from core.clock import Clock
from core.errors import HaltTradingError, RetryableError
from core.events import LoopFailed

log = logging.getLogger(__name__)

LoopFactory = Callable[[], Awaitable[None]]
ShutdownHook = Callable[[], object]  # may return an awaitable, which is awaited


@dataclass(frozen=True)
class LoopSpec:
    name: str
    run: LoopFactory
    #: cancelled at the start of the stop, waited for after the ordered loops (same deadline)
    stop_early: bool = False


class LoopState(enum.StrEnum):
    STARTING = "starting"
    RUNNING = "running"
    BACKING_OFF = "backing_off"
    STOPPED = "stopped"


@dataclass
class LoopStatus:
    state: LoopState = LoopState.STARTING
    restarts: int = 0
    last_error: str | None = None


@dataclass
class ShutdownReport:
    reason: str
    stopped_in_order: list[str] = field(default_factory=list)
    stuck: list[str] = field(default_factory=list)
    hooks_failed: list[str] = field(default_factory=list)
    #: real seconds from the start of the stop until each loop had stopped (the stuck: absent)
    stopped_after_secs: dict[str, float] = field(default_factory=dict)


class Supervisor:
    def __init__(
        self,
        clock: Clock,
        bus: EventBus,
        loops: Sequence[LoopSpec],
        *,
        policy: Backoff | None = None,
        shutdown_hooks: Sequence[tuple[str, ShutdownHook]] = (),
        shutdown_deadline_secs: float = 8.0,
        rng: random.Random | None = None,
        on_halt: Callable[[str], object] | None = None,
    ) -> None:
        """``on_halt`` receives a ``HaltTradingError`` a loop raised (the loop still restarts)."""
        names = [spec.name for spec in loops]
        if len(set(names)) != len(names):
            raise ValueError(f"loop names must be unique: {names}")
        self._clock = clock
        self._bus = bus
        self._loops = tuple(loops)
        self._policy = policy or Backoff()
        self._hooks = tuple(shutdown_hooks)
        self._deadline_secs = shutdown_deadline_secs
        self._rng = rng or random.Random()
        self._on_halt = on_halt
        self._stop = asyncio.Event()
        self._stop_reason = ""
        self.status: dict[str, LoopStatus] = {name: LoopStatus() for name in names}
        self.shutdown_report: ShutdownReport | None = None

    @property
    def loops(self) -> tuple[LoopSpec, ...]:
        return self._loops

    def request_stop(self, reason: str) -> None:
        if not self._stop.is_set():
            log.info("stop requested (%s): stopping loops in order", reason)
            self._stop_reason = reason
            self._stop.set()

    async def run(self, start: LoopFactory | None = None) -> ShutdownReport:
        """Run ``start`` (warm-up, reconcile), then every loop until ``request_stop``; then stop
        them in order and run the hooks.

        A stop requested during ``start`` cancels it and the loops never start. The stop deadline
        is enforced: a loop (or start) that swallows its cancellation is abandoned, reported in
        ``stuck``, and the hooks run regardless, so journals are flushed and state is saved.
        If ``start`` raises, the hooks run and the error propagates.
        """
        report = ShutdownReport(reason="")
        started = start is None or await self._start_phase(start, report)
        if started:
            tasks = {
                spec.name: asyncio.create_task(self._supervise(spec), name=f"loop:{spec.name}")
                for spec in self._loops
            }
            try:
                await self._stop.wait()
            except asyncio.CancelledError:
                for task in tasks.values():  # the caller gave up on us: leave no loop behind
                    task.cancel()
                raise
            report.reason = self._stop_reason
            await self._stop_in_order(tasks, report)
        await self._run_hooks(report)
        self.shutdown_report = report
        log.info(
            "stopped (%s): loops %s%s",
            report.reason,
            ", ".join(
                f"{name} {report.stopped_after_secs[name]:.2f} s"
                for name in report.stopped_in_order
            )
            or "none",
            f"; did not stop in time: {report.stuck}" if report.stuck else "",
        )
        return report

    async def _start_phase(self, start: LoopFactory, report: ShutdownReport) -> bool:
        """True when ``start`` completed; False when a stop request cancelled it."""
        task = asyncio.ensure_future(start())
        stop = asyncio.ensure_future(self._stop.wait())
        try:
            await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
        if task.done():
            try:
                task.result()
            except BaseException:
                await self._run_hooks(report)
                raise
            return True
        report.reason = self._stop_reason
        log.info("stop requested during start-up (%s): cancelling it", report.reason)
        await self._cancel_within({"start": task}, report, time.monotonic() + self._deadline_secs)
        return False

    async def _supervise(self, spec: LoopSpec) -> None:
        status = self.status[spec.name]
        attempt = 0
        while True:
            started_secs = self._clock.monotonic_secs()
            status.state = LoopState.RUNNING
            try:
                await spec.run()
                error = "returned (loops must run until cancelled)"
                log.error("loop %s %s; restarting", spec.name, error)
            except asyncio.CancelledError:
                status.state = LoopState.STOPPED
                raise
            except RetryableError as exc:  # expected and said by its message: no traceback
                error = f"{type(exc).__name__}: {exc}"
                log.error("loop %s failed: %s; retrying after its backoff", spec.name, error)
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"
                log.exception("loop %s crashed: %s", spec.name, error)
                if isinstance(exc, HaltTradingError) and self._on_halt is not None:
                    self._on_halt(f"loop {spec.name}: {exc}")
            if self._stop.is_set():
                status.state = LoopState.STOPPED
                return  # shutting down: a loop that ends now is done, not restarted
            if self._clock.monotonic_secs() - started_secs >= self._policy.cap_secs:
                attempt = 0
            delay_secs = self._policy.delay_secs(attempt, self._rng.random())
            attempt += 1
            status.restarts += 1
            status.last_error = error
            status.state = LoopState.BACKING_OFF
            self._bus.publish(
                LoopFailed(
                    at_ms=self._clock.now_ms(),
                    loop=spec.name,
                    error=error,
                    restarts=status.restarts,
                    restart_in_secs=delay_secs,
                )
            )
            log.warning(
                "loop %s restarts in %.2f s (restart #%d)", spec.name, delay_secs, status.restarts
            )
            await self._clock.sleep(delay_secs)

    async def _stop_in_order(
        self, tasks: dict[str, asyncio.Task[None]], report: ShutdownReport
    ) -> None:
        early = [spec.name for spec in self._loops if spec.stop_early]
        for name in early:
            tasks[name].cancel()
        ordered = {name: task for name, task in tasks.items() if name not in early}
        await self._cancel_within(
            ordered | {name: tasks[name] for name in early},
            report,
            time.monotonic() + self._deadline_secs,
        )

    async def _cancel_within(
        self,
        tasks: Mapping[str, asyncio.Future[None]],
        report: ShutdownReport,
        deadline: float,
    ) -> None:
        """Cancel each task in order and wait for it until the real-time ``deadline``; a task
        still running then is abandoned (it swallowed its cancellation) and reported stuck."""
        started = time.monotonic()

        def stopped(name: str) -> Callable[[object], None]:
            def record(_: object) -> None:  # when it stopped, even one waited for after others
                if name not in report.stuck:
                    report.stopped_after_secs[name] = time.monotonic() - started

            return record

        for name, task in tasks.items():
            task.add_done_callback(stopped(name))
        for name, task in tasks.items():
            task.cancel()
            remaining = max(0.0, deadline - time.monotonic())
            done, _ = await asyncio.wait({task}, timeout=remaining)
            if done:
                report.stopped_in_order.append(name)
                report.stopped_after_secs.setdefault(name, time.monotonic() - started)
            else:
                report.stuck.append(name)
                log.error(
                    "%s did not stop within the shutdown deadline (%.1f s); abandoned",
                    name,
                    self._deadline_secs,
                )

    async def _run_hooks(self, report: ShutdownReport) -> None:
        report.hooks_failed.extend(await run_hooks(self._hooks))


async def run_hooks(hooks: Iterable[tuple[str, ShutdownHook]], when: str = "shutdown") -> list[str]:
    """Run each hook in turn (awaiting what it returns); one that fails is logged and the next
    still runs. The names of those that failed."""
    failed: list[str] = []
    for name, hook in hooks:
        try:
            result = hook()
            if inspect.isawaitable(result):
                await result
            log.info("%s: %s done", when, name)
        except Exception:
            failed.append(name)
            log.exception("%s: %s failed", when, name)
    return failed
