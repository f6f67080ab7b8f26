"""Supervisor: restart with backoff, isolation between loops, ordered shutdown with hooks."""

from __future__ import annotations

import asyncio
import logging
import random
import re
from collections.abc import Awaitable, Callable

import pytest

from core.backoff import Backoff
from core.bus import EventBus
from core.clock import VirtualClock
from core.events import LoopFailed, Topic
from runner.supervisor import LoopSpec, Supervisor


async def _until(
    predicate: Callable[[], bool], clock: VirtualClock, max_steps: int = 10_000
) -> None:
    """Drive virtual time until ``predicate()`` holds."""
    for _ in range(max_steps):
        if predicate():
            return
        if not await clock.step():
            await asyncio.sleep(0)
    raise AssertionError("condition never became true")


def _failures(bus: EventBus) -> list[LoopFailed]:
    seen: list[LoopFailed] = []
    bus.subscribe(Topic.LOOP_FAILED, seen.append)  # type: ignore[arg-type]
    return seen


async def test_crashing_loop_is_logged_and_restarted_with_backoff(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock, bus = VirtualClock(), EventBus()
    failures = _failures(bus)
    runs = 0

    async def flaky() -> None:
        nonlocal runs
        runs += 1
        if runs <= 3:
            raise RuntimeError(f"boom {runs}")
        await clock.sleep(10**9)

    sup = Supervisor(
        clock,
        bus,
        [LoopSpec("flaky", flaky)],
        policy=Backoff(base_secs=2.0, cap_secs=60.0, jitter_fraction=0.0),
    )
    caplog.set_level(logging.ERROR)
    task = asyncio.create_task(sup.run())
    await _until(lambda: runs == 4, clock)

    assert [f.restart_in_secs for f in failures] == [2.0, 4.0, 8.0]
    assert [f.error for f in failures] == [f"RuntimeError: boom {i}" for i in (1, 2, 3)]
    assert sup.status["flaky"].restarts == 3
    crash_logs = [r for r in caplog.records if "crashed" in r.getMessage()]
    assert len(crash_logs) == 3 and all(r.exc_info for r in crash_logs)
    sup.request_stop("test")
    await task


async def test_one_failing_loop_does_not_disturb_the_others() -> None:
    clock, bus = VirtualClock(), EventBus()
    beats = 0

    async def steady() -> None:
        nonlocal beats
        while True:
            beats += 1
            await clock.sleep(1.0)

    async def broken() -> None:
        raise ValueError("always")

    sup = Supervisor(
        clock,
        bus,
        [LoopSpec("steady", steady), LoopSpec("broken", broken)],
        policy=Backoff(base_secs=1.0, cap_secs=4.0, jitter_fraction=0.0),
    )
    task = asyncio.create_task(sup.run())
    await clock.advance(30.0)
    assert beats >= 30
    assert sup.status["broken"].restarts >= 7  # 1, 2, 4, 4, 4, ... seconds apart
    sup.request_stop("test")
    await task


async def test_a_loop_that_returns_is_restarted() -> None:
    clock, bus = VirtualClock(), EventBus()
    runs = 0

    async def quits() -> None:
        nonlocal runs
        runs += 1

    sup = Supervisor(
        clock,
        bus,
        [LoopSpec("quits", quits)],
        policy=Backoff(base_secs=1.0, cap_secs=1.0, jitter_fraction=0.0),
    )
    task = asyncio.create_task(sup.run())
    await _until(lambda: runs >= 3, clock)
    assert sup.status["quits"].last_error is not None
    assert "returned" in sup.status["quits"].last_error
    sup.request_stop("test")
    await task


async def test_attempts_reset_after_a_healthy_run() -> None:
    clock, bus = VirtualClock(), EventBus()
    failures = _failures(bus)
    runs = 0

    async def sometimes() -> None:
        nonlocal runs
        runs += 1
        if runs == 3:
            await clock.sleep(100.0)  # healthy for longer than the cap
        raise RuntimeError("x")

    sup = Supervisor(
        clock,
        bus,
        [LoopSpec("s", sometimes)],
        policy=Backoff(base_secs=1.0, cap_secs=10.0, jitter_fraction=0.0),
    )
    task = asyncio.create_task(sup.run())
    await _until(lambda: len(failures) >= 4, clock)
    assert [f.restart_in_secs for f in failures[:4]] == [1.0, 2.0, 1.0, 2.0]
    sup.request_stop("test")
    await task


async def test_stop_cancels_loops_in_order_then_runs_hooks_in_order() -> None:
    clock, bus = VirtualClock(), EventBus()
    events: list[str] = []

    def looping(name: str) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            try:
                await clock.sleep(10**9)
            except asyncio.CancelledError:
                events.append(f"stopped {name}")
                raise

        return run

    async def flush() -> None:
        events.append("flush journals")

    sup = Supervisor(
        clock,
        bus,
        [
            LoopSpec(n, looping(n))
            for n in ("market", "derivatives", "tracker", "watchdog", "heartbeat")
        ],
        shutdown_hooks=[("flush", flush), ("save", lambda: events.append("save state"))],
    )
    task = asyncio.create_task(sup.run())
    await clock.advance(1.0)
    sup.request_stop("SIGTERM")
    report = await task
    assert events == [
        "stopped market",
        "stopped derivatives",
        "stopped tracker",
        "stopped watchdog",
        "stopped heartbeat",
        "flush journals",
        "save state",
    ]
    assert report.reason == "SIGTERM"
    assert report.stuck == [] and report.hooks_failed == []


async def test_a_failing_hook_does_not_skip_the_next_one(caplog: pytest.LogCaptureFixture) -> None:
    clock, bus = VirtualClock(), EventBus()
    ran: list[str] = []

    def bad() -> None:
        raise OSError("disk full")

    sup = Supervisor(
        clock,
        bus,
        [],
        shutdown_hooks=[("flush", bad), ("save", lambda: ran.append("save"))],
    )
    task = asyncio.create_task(sup.run())
    await asyncio.sleep(0)
    sup.request_stop("test")
    report = await task
    assert ran == ["save"]
    assert report.hooks_failed == ["flush"]
    assert any("flush failed" in r.getMessage() for r in caplog.records)


async def test_a_loop_that_ignores_cancellation_is_reported_stuck() -> None:
    clock, bus = VirtualClock(), EventBus()
    release = asyncio.Event()

    async def stubborn() -> None:
        while not release.is_set():
            try:
                await release.wait()
            except asyncio.CancelledError:
                continue  # a bug we must survive: the deadline still holds

    sup = Supervisor(clock, bus, [LoopSpec("stubborn", stubborn)], shutdown_deadline_secs=0.05)
    task = asyncio.create_task(sup.run())
    await asyncio.sleep(0)
    sup.request_stop("test")
    await asyncio.sleep(0.2)  # real time: the deadline under test is a real-time one
    release.set()
    report = await task
    assert report.stuck == ["stubborn"]


def test_duplicate_loop_names_are_refused() -> None:
    async def idle() -> None:
        await asyncio.Event().wait()

    with pytest.raises(ValueError, match="unique"):
        Supervisor(VirtualClock(), EventBus(), [LoopSpec("a", idle), LoopSpec("a", idle)])


async def test_jitter_keeps_delays_within_bounds() -> None:
    clock, bus = VirtualClock(), EventBus()
    failures = _failures(bus)

    async def broken() -> None:
        raise RuntimeError("x")

    sup = Supervisor(
        clock,
        bus,
        [LoopSpec("b", broken)],
        policy=Backoff(base_secs=1.0, cap_secs=8.0, jitter_fraction=0.5),
        rng=random.Random(7),
    )
    task = asyncio.create_task(sup.run())
    await _until(lambda: len(failures) >= 8, clock)
    for attempt, failure in enumerate(failures[:8]):
        full = min(8.0, 2.0**attempt)
        assert full * 0.5 <= failure.restart_in_secs <= full
    sup.request_stop("test")
    await task


async def test_a_loop_that_swallows_cancellation_cannot_keep_run_from_returning() -> None:
    """The deadline is enforced: run() returns and the hooks (flush, save) run while the stubborn
    loop is still alive, instead of waiting for it forever."""
    clock, bus = VirtualClock(), EventBus()
    never = asyncio.Event()
    hooks: list[str] = []

    async def stubborn() -> None:
        while not never.is_set():
            try:
                await never.wait()
            except asyncio.CancelledError:
                continue

    sup = Supervisor(
        clock,
        bus,
        [LoopSpec("stubborn", stubborn)],
        shutdown_hooks=[("save", lambda: hooks.append("save"))],
        shutdown_deadline_secs=0.05,
    )
    task = asyncio.create_task(sup.run())
    await asyncio.sleep(0)
    sup.request_stop("SIGTERM")
    report = await asyncio.wait_for(task, timeout=5.0)
    assert report.stuck == ["stubborn"]
    assert hooks == ["save"]
    (abandoned,) = [t for t in asyncio.all_tasks() if t.get_name() == "loop:stubborn"]
    assert not abandoned.done()
    never.set()  # let the test end
    await abandoned


async def test_a_stop_during_the_start_phase_cancels_it_and_still_runs_the_hooks() -> None:
    clock, bus = VirtualClock(), EventBus()
    events: list[str] = []

    async def warm_up() -> None:
        events.append("warm-up started")
        try:
            await asyncio.Event().wait()  # a slow REST API
        except asyncio.CancelledError:
            events.append("warm-up cancelled")
            raise

    async def loop() -> None:
        events.append("loop started")
        await clock.sleep(10**9)

    sup = Supervisor(
        clock,
        bus,
        [LoopSpec("market", loop)],
        shutdown_hooks=[("save", lambda: events.append("save state"))],
    )
    task = asyncio.create_task(sup.run(start=warm_up))
    await asyncio.sleep(0)
    sup.request_stop("SIGTERM")
    report = await asyncio.wait_for(task, timeout=5.0)
    assert events == ["warm-up started", "warm-up cancelled", "save state"]
    assert report.reason == "SIGTERM" and report.stopped_in_order == ["start"]


async def test_loops_start_after_the_start_phase_and_a_failing_start_still_saves() -> None:
    clock, bus = VirtualClock(), EventBus()
    events: list[str] = []

    async def start() -> None:
        events.append("start")

    async def loop() -> None:
        events.append("loop")
        await clock.sleep(10**9)

    sup = Supervisor(clock, bus, [LoopSpec("market", loop)])
    task = asyncio.create_task(sup.run(start=start))
    await _until(lambda: events == ["start", "loop"], clock)
    sup.request_stop("test")
    assert (await task).stopped_in_order == ["market"]

    async def refused() -> None:
        raise RuntimeError("live trading not confirmed")

    saved: list[str] = []
    failing = Supervisor(clock, bus, [], shutdown_hooks=[("save", lambda: saved.append("x"))])
    with pytest.raises(RuntimeError, match="not confirmed"):
        await failing.run(start=refused)
    assert saved == ["x"]


async def test_a_stop_early_loop_winds_down_beside_the_ordered_ones(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The API process's grace must not add to the other loops' stops: a loop marked
    ``stop_early`` is cancelled first, even though it comes later in the order, and its wind-down
    overlaps the ordered ones (here it lasts until the market loop has stopped)."""
    clock, bus = VirtualClock(), EventBus()
    events: list[str] = []
    market_stopped = asyncio.Event()

    async def market() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            events.append("market cancelled")
            await asyncio.sleep(0)  # a wind-down of its own: the api's must run meanwhile
            events.append("market stopped")
            market_stopped.set()
            raise

    async def api() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            events.append("api cancelled")
            await market_stopped.wait()  # a child process's grace, still running
            events.append("api stopped")
            raise

    sup = Supervisor(
        clock,
        bus,
        [LoopSpec("market", market), LoopSpec("api", api, stop_early=True)],
        shutdown_deadline_secs=30.0,
    )
    caplog.set_level(logging.INFO, logger="runner.supervisor")
    task = asyncio.create_task(sup.run())
    await asyncio.sleep(0)
    sup.request_stop("SIGTERM")
    report = await asyncio.wait_for(task, timeout=60.0)
    assert events == ["api cancelled", "market cancelled", "market stopped", "api stopped"]
    assert report.stopped_in_order == ["market", "api"] and report.stuck == []
    assert set(report.stopped_after_secs) == {"market", "api"}
    assert 0 <= report.stopped_after_secs["market"] <= report.stopped_after_secs["api"]
    (line,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("stopped (")]
    assert re.fullmatch(r"stopped \(SIGTERM\): loops market \d+\.\d\d s, api \d+\.\d\d s", line)


async def test_a_stuck_loop_has_no_stop_time_even_when_it_ends_later() -> None:
    clock, bus = VirtualClock(), EventBus()
    release = asyncio.Event()

    async def stubborn() -> None:
        while not release.is_set():
            try:
                await release.wait()
            except asyncio.CancelledError:
                continue

    async def polite() -> None:
        await asyncio.Event().wait()

    sup = Supervisor(
        clock,
        bus,
        [LoopSpec("stubborn", stubborn), LoopSpec("polite", polite)],
        shutdown_deadline_secs=0.05,
    )
    task = asyncio.create_task(sup.run())
    await asyncio.sleep(0)
    sup.request_stop("test")
    report = await asyncio.wait_for(task, timeout=5.0)
    (abandoned,) = [t for t in asyncio.all_tasks() if t.get_name() == "loop:stubborn"]
    release.set()
    await abandoned
    assert report.stuck == ["stubborn"]
    assert "stubborn" not in report.stopped_after_secs
