"""Supervisor: restart with backoff, isolation between loops (the start phase and the ordered
shutdown are in ``test_supervisor_start_stop``)."""

from __future__ import annotations

import asyncio
import logging
import random

import pytest
from supervisor_support import until

from core.backoff import Backoff
from core.bus import EventBus
from core.clock import VirtualClock
from core.errors import RetryableError
from core.events import LoopFailed, Topic
from runner.supervisor import LoopSpec, Supervisor


def _failures(bus: EventBus) -> list[LoopFailed]:
    seen: list[LoopFailed] = []
    bus.subscribe(Topic.LOOP_FAILED, seen.append)  # type: ignore[arg-type]
    return seen


@pytest.mark.parametrize(
    ("error", "logged", "traceback"),
    [
        (RuntimeError, "crashed: RuntimeError", True),
        (RetryableError, "failed: RetryableError", False),
    ],
)
async def test_a_failing_loop_is_logged_and_restarted_with_backoff(
    caplog: pytest.LogCaptureFixture, error: type[Exception], logged: str, traceback: bool
) -> None:
    """A crash is logged with its traceback. A ``RetryableError`` is expected and says what
    happened (a port in use, a source down): its handler backs off and tries again, logging one
    line, not a traceback per attempt."""
    clock, bus = VirtualClock(), EventBus()
    failures = _failures(bus)
    runs = 0

    async def flaky() -> None:
        nonlocal runs
        runs += 1
        if runs <= 3:
            raise error(f"boom {runs}")
        await clock.sleep(10**9)

    sup = Supervisor(
        clock,
        bus,
        [LoopSpec("flaky", flaky)],
        policy=Backoff(base_secs=2.0, cap_secs=60.0, jitter_fraction=0.0),
    )
    caplog.set_level(logging.ERROR)
    task = asyncio.create_task(sup.run())
    await until(lambda: runs == 4, clock)

    assert [f.restart_in_secs for f in failures] == [2.0, 4.0, 8.0]
    assert [f.error for f in failures] == [f"{error.__name__}: boom {i}" for i in (1, 2, 3)]
    assert sup.status["flaky"].restarts == 3
    lines = [r for r in caplog.records if "loop flaky" in r.getMessage()]
    assert len(lines) == 3
    assert all(logged in r.getMessage() and bool(r.exc_info) == traceback for r in lines)
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
    await until(lambda: runs >= 3, clock)
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
    await until(lambda: len(failures) >= 4, clock)
    assert [f.restart_in_secs for f in failures[:4]] == [1.0, 2.0, 1.0, 2.0]
    sup.request_stop("test")
    await task


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
    await until(lambda: len(failures) >= 8, clock)
    for attempt, failure in enumerate(failures[:8]):
        full = min(8.0, 2.0**attempt)
        assert full * 0.5 <= failure.restart_in_secs <= full
    sup.request_stop("test")
    await task
