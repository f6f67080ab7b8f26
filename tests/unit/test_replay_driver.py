"""ReplayDriver and VirtualClock.release_next: time moves only when the daemon is quiet."""

from __future__ import annotations

import asyncio

import pytest
from fakes.tasks import stop_tasks

from core.clock import VirtualClock
from runner.replay.driver import ReplayDriver

EPOCH_MS = 1_740_787_200_000  # 2025-03-01T00:00Z


async def test_release_next_wakes_every_sleeper_of_the_earliest_deadline_in_fifo_order() -> None:
    clock = VirtualClock(EPOCH_MS)
    woke: list[str] = []

    async def sleeper(name: str, secs: float) -> None:
        await clock.sleep(secs)
        woke.append(f"{name}@{clock.monotonic_secs():g}")

    tasks = [asyncio.create_task(sleeper(n, s)) for n, s in (("a", 5), ("b", 3), ("c", 3))]
    await asyncio.sleep(0)
    assert clock.release_next() == 3.0
    assert woke == []  # released, not yet run: the caller decides when they run
    await asyncio.sleep(0)
    assert woke == ["b@3", "c@3"]
    assert clock.release_next() == 5.0
    await asyncio.gather(*tasks)
    assert woke == ["b@3", "c@3", "a@5"]
    assert clock.release_next() is None
    assert clock.now_ms() == EPOCH_MS + 5000


async def test_release_next_skips_cancelled_sleepers() -> None:
    clock = VirtualClock()
    early = asyncio.create_task(clock.sleep(1))
    late = asyncio.create_task(clock.sleep(2))
    await asyncio.sleep(0)
    early.cancel()
    await asyncio.sleep(0)
    assert clock.release_next() == 2.0
    await late


async def test_the_driver_lets_each_instants_work_finish_before_time_moves() -> None:
    """A chain of plain awaits started at one instant (many loop turns, more than the clock's own
    settle turns) completes before the next wake-up is released."""
    clock = VirtualClock(EPOCH_MS)
    seen: list[tuple[str, int]] = []

    async def slow_chain() -> None:
        await clock.sleep(10)
        for _ in range(50):
            await asyncio.sleep(0)
        seen.append(("chain done", clock.now_ms()))

    async def ticker() -> None:
        while True:
            await clock.sleep(10)
            seen.append(("tick", clock.now_ms()))

    tasks = [asyncio.create_task(slow_chain()), asyncio.create_task(ticker())]
    result = await ReplayDriver(clock, EPOCH_MS + 30_000).run()
    await stop_tasks(*tasks)
    assert seen == [
        ("tick", EPOCH_MS + 10_000),
        ("chain done", EPOCH_MS + 10_000),
        ("tick", EPOCH_MS + 20_000),
    ]
    assert result.finished
    assert result.reached_ms == EPOCH_MS + 20_000  # the wake-up at 30 s is the end: not released


async def test_a_busy_probe_holds_time_still_while_work_waits_outside_the_loop() -> None:
    clock = VirtualClock(EPOCH_MS)
    in_flight = False
    finished_at: list[int] = []

    async def network_call() -> None:
        nonlocal in_flight
        await clock.sleep(1)
        in_flight = True
        await asyncio.sleep(0.02)  # real I/O: the loop has nothing ready meanwhile
        in_flight = False
        finished_at.append(clock.now_ms())

    async def timer() -> None:
        await clock.sleep(2)

    tasks = [asyncio.create_task(network_call()), asyncio.create_task(timer())]
    driver = ReplayDriver(clock, EPOCH_MS + 10_000, busy=[lambda: in_flight])
    await driver.run()
    await asyncio.gather(*tasks)
    assert finished_at == [EPOCH_MS + 1000]  # the 2 s timer did not overtake it


async def test_the_driver_reports_when_nothing_is_left_asleep() -> None:
    clock = VirtualClock(EPOCH_MS)
    task = asyncio.create_task(clock.sleep(1))
    steps: list[int] = []
    result = await ReplayDriver(clock, EPOCH_MS + 60_000, on_step=steps.append).run()
    await task
    assert not result.finished
    assert steps == [EPOCH_MS + 1000]
    assert result.steps == 1


def test_the_driver_refuses_a_non_positive_speed() -> None:
    with pytest.raises(ValueError, match="speed"):
        ReplayDriver(VirtualClock(), 0, speed=0)
