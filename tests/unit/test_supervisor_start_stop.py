"""Supervisor: the start phase (cancellable, loops after it) and the ordered shutdown: loops
cancelled in order then hooks in order, a failing hook or a stuck loop skipping nothing, stop_early
loops winding down beside the ordered ones."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable

import pytest
from supervisor_support import swallowing, until

from core.bus import EventBus
from core.clock import VirtualClock
from runner.supervisor import LoopSpec, Supervisor


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


async def test_a_loop_that_ignores_cancellation_is_reported_stuck(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock, bus = VirtualClock(), EventBus()
    release = asyncio.Event()
    stubborn = swallowing(release)

    sup = Supervisor(clock, bus, [LoopSpec("stubborn", stubborn)], shutdown_deadline_secs=0.05)
    task = asyncio.create_task(sup.run())
    await asyncio.sleep(0)
    sup.request_stop("test")
    # the deadline under test is a real-time one: the loop is let go once the supervisor has
    # given up on it, not after a fixed 0.2 s, which a stall of the process before the stop set
    # its deadline would have let pass first
    async with asyncio.timeout(30):
        while "did not stop within the shutdown deadline" not in caplog.text:
            await asyncio.sleep(0.01)
    release.set()
    report = await task
    assert report.stuck == ["stubborn"]


async def test_a_loop_that_swallows_cancellation_cannot_keep_run_from_returning() -> None:
    """The deadline is enforced: run() returns and the hooks (flush, save) run while the stubborn
    loop is still alive, instead of waiting for it forever."""
    clock, bus = VirtualClock(), EventBus()
    never = asyncio.Event()
    hooks: list[str] = []
    stubborn = swallowing(never)

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
    await until(lambda: events == ["start", "loop"], clock)
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
    stubborn = swallowing(release)

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
