"""One contract for the three clocks (what only the virtual and scaled clocks promise:
``test_clock_virtual.py``).

Every contract test body is written once against a ``ClockRig``: the clock, the size of one "unit"
of its time (tiny in real terms for the wall and scaled clocks, so the suite stays fast) and a
driver that makes time pass (advances the virtual clock, or waits for the real ones to move).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Coroutine, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import pytest

from core.clock import Clock, VirtualClock, WallClock
from core.clock_wait import wait_for
from core.scaled_clock import ScaledClock

T = TypeVar("T")

#: loop turns / virtual steps a driver may take before the test is declared hung
MAX_DRIVE_ROUNDS = 100_000


@dataclass
class ClockRig:
    name: str
    clock: Clock
    unit_secs: float  # one unit of this clock's time; real clocks keep it a few ms of real time

    def secs(self, units: float) -> float:
        return units * self.unit_secs

    async def let_time_pass(self, units: float) -> None:
        """Return once at least ``units`` of this clock's time have passed."""
        clock = self.clock
        target = clock.monotonic_secs() + self.secs(units)
        if isinstance(clock, VirtualClock):
            await clock.advance_to(target)
            return
        # real clocks: wait on the condition "the clock reached target", not a fixed sleep
        for _ in range(MAX_DRIVE_ROUNDS):
            if clock.monotonic_secs() >= target:
                return
            await asyncio.sleep(0.0005)
        raise AssertionError(f"{self.name}: time did not pass")

    async def run(self, aw: Coroutine[Any, Any, T]) -> T:
        """Await ``aw`` while making this clock's time pass as the work needs it."""
        task = asyncio.ensure_future(aw)
        clock = self.clock
        if not isinstance(clock, VirtualClock):
            return await task
        for _ in range(MAX_DRIVE_ROUNDS):
            if task.done():
                return task.result()
            if not await clock.step():
                await asyncio.sleep(0)  # the work has not registered its next sleep yet
        task.cancel()
        raise AssertionError(f"{self.name}: work never finished")


def _wall() -> ClockRig:
    return ClockRig("wall", WallClock(), unit_secs=0.005)


def _scaled() -> ClockRig:
    # 1000x: one unit is 5 s of clock time and 5 ms of real time
    return ClockRig("scaled", ScaledClock(epoch_ms=1_735_689_600_000, speed=1000.0), unit_secs=5.0)


def _virtual() -> ClockRig:
    return ClockRig("virtual", VirtualClock(epoch_ms=1_735_689_600_000), unit_secs=60.0)


@pytest.fixture(params=[_wall, _scaled, _virtual], ids=["wall", "scaled", "virtual"])
def rig(request: pytest.FixtureRequest) -> Iterator[ClockRig]:
    yield request.param()


# ---------------------------------------------------------------------------------------------
# the shared contract


def test_every_clock_satisfies_the_protocol(rig: ClockRig) -> None:
    assert isinstance(rig.clock, Clock)


async def test_readings_never_go_backwards_and_follow_passing_time(rig: ClockRig) -> None:
    clock = rig.clock
    # the first epoch reading before the first monotonic one, the last after the last: the epoch
    # readings then span at least the monotonic ones however long the process stalls between two
    # calls (at 1000x a stall of 2 us of real time there was 2 ms of scaled time unaccounted)
    first_ms = clock.now_ms()
    readings = [(first_ms, clock.monotonic_secs())]
    for units in (0.5, 0.0, 1.0, 0.25, 2.0):
        before = clock.monotonic_secs()
        await rig.let_time_pass(units)
        assert clock.monotonic_secs() - before >= rig.secs(units)
        readings.append((clock.now_ms(), clock.monotonic_secs()))
        for _ in range(50):  # tight back-to-back reads too
            readings.append((clock.now_ms(), clock.monotonic_secs()))
    last_mono = clock.monotonic_secs()
    readings.append((clock.now_ms(), last_mono))
    now_series = [r[0] for r in readings]
    mono_series = [r[1] for r in readings]
    assert now_series == sorted(now_series)
    assert mono_series == sorted(mono_series)
    # epoch time moved at least as far as the monotonic reading (minus ms rounding)
    assert now_series[-1] - first_ms >= (last_mono - mono_series[0]) * 1000 - 2


@pytest.mark.parametrize("units", [0.0, 0.5, 1.0, 3.0])
async def test_sleep_takes_at_least_the_requested_clock_time(rig: ClockRig, units: float) -> None:
    clock = rig.clock
    start_mono, start_ms = clock.monotonic_secs(), clock.now_ms()
    await rig.run(clock.sleep(rig.secs(units)))
    assert clock.monotonic_secs() - start_mono >= rig.secs(units)
    assert clock.now_ms() - start_ms >= int(rig.secs(units) * 1000) - 1


async def test_negative_sleep_returns_without_moving_time_backwards(rig: ClockRig) -> None:
    clock = rig.clock
    start = clock.monotonic_secs()
    await rig.run(clock.sleep(-rig.secs(1)))
    assert clock.monotonic_secs() >= start


async def test_concurrent_sleepers_wake_in_deadline_order_fifo_among_equals(rig: ClockRig) -> None:
    """Ordered by each sleeper's own deadline, set as it goes to sleep: the sleepers start one
    after another, and on a real clock a loaded machine may put milliseconds between two starts
    (once more than a unit: the later of two sleepers a unit apart then had the later deadline).
    On the virtual clock no time passes between the starts, so equal durations are equal
    deadlines, woken first come first."""
    clock = rig.clock
    woke: list[int] = []
    durations_units = [4, 1, 3, 1, 2, 4, 1]
    starts: list[float] = []  # each sleeper's reading as it starts, then one after the last

    async def sleeper(idx: int, units: int) -> None:
        starts.append(clock.monotonic_secs())
        await clock.sleep(rig.secs(units))
        woke.append(idx)

    async def after_the_last() -> None:
        starts.append(clock.monotonic_secs())

    async def all_sleepers() -> None:
        sleepers = (sleeper(i, u) for i, u in enumerate(durations_units))
        await asyncio.gather(*sleepers, after_the_last())

    await rig.run(all_sleepers())
    # the tasks start in order, each reading the clock and then setting its timer in one step, so
    # sleeper i's deadline lies between its own start and the next one's, plus its duration: a
    # process stall between the reading and the timer (15 ms was enough) cannot then swap two
    # sleepers the check expects in the other order
    assert len(starts) == len(durations_units) + 1 and starts == sorted(starts)
    earliest = [starts[i] + rig.secs(u) for i, u in enumerate(durations_units)]
    latest = [starts[i + 1] + rig.secs(u) for i, u in enumerate(durations_units)]
    for pos, first in enumerate(woke):
        for later in woke[pos + 1 :]:
            assert latest[later] >= earliest[first], (woke, first, later, earliest, latest)
    if isinstance(clock, VirtualClock):
        assert woke == sorted(range(len(durations_units)), key=lambda i: (durations_units[i], i))


async def test_cancelling_a_sleeper_is_clean_and_spares_the_others(rig: ClockRig) -> None:
    clock = rig.clock
    woke: list[str] = []

    async def sleeper(name: str, units: float) -> None:
        await clock.sleep(rig.secs(units))
        woke.append(name)

    doomed = asyncio.create_task(sleeper("doomed", 1))
    survivor = asyncio.create_task(sleeper("survivor", 2))
    await asyncio.sleep(0)  # both are now asleep
    doomed.cancel()
    with pytest.raises(asyncio.CancelledError):
        await doomed
    assert doomed.cancelled()
    await rig.run(_await(survivor))
    assert woke == ["survivor"]
    if isinstance(clock, VirtualClock):
        assert clock.pending_sleepers == 0
        assert clock.next_deadline_secs() is None


async def test_a_sleeper_cancelled_before_it_ever_ran_is_clean(rig: ClockRig) -> None:
    task = asyncio.create_task(rig.clock.sleep(rig.secs(1)))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    if isinstance(rig.clock, VirtualClock):
        assert rig.clock.pending_sleepers == 0


async def test_wait_for_returns_the_result_of_fast_work(rig: ClockRig) -> None:
    clock = rig.clock

    async def work() -> str:
        await clock.sleep(rig.secs(1))
        return "done"

    assert await rig.run(wait_for(clock, work(), timeout_secs=rig.secs(4))) == "done"
    if isinstance(clock, VirtualClock):
        assert clock.pending_sleepers == 0  # the timeout timer did not linger


async def test_wait_for_passes_through_the_works_exception(rig: ClockRig) -> None:
    async def work() -> None:
        await rig.clock.sleep(rig.secs(1))
        raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        await rig.run(wait_for(rig.clock, work(), timeout_secs=rig.secs(4)))


async def test_wait_for_times_out_on_clock_time_and_cancels_the_work(rig: ClockRig) -> None:
    clock = rig.clock
    outcome: list[str] = []

    async def slow_work() -> str:
        try:
            # far beyond the timeout: the work's timer is set first, so on a real clock a stall
            # between the two timers (240 ms, at 50 units) would let the work finish first
            await clock.sleep(rig.secs(10_000))
        except asyncio.CancelledError:
            outcome.append("cancelled")
            raise
        outcome.append("finished")
        return "too late"

    start = clock.monotonic_secs()
    with pytest.raises(TimeoutError):
        await rig.run(wait_for(clock, slow_work(), timeout_secs=rig.secs(2)))
    elapsed = clock.monotonic_secs() - start
    assert elapsed >= rig.secs(2)
    assert outcome == ["cancelled"]  # cancelled and unwound before wait_for returned
    if isinstance(clock, VirtualClock):
        assert elapsed == rig.secs(2)  # the timeout fired at its deadline, not at the work's
        assert clock.pending_sleepers == 0


async def test_cancelling_wait_for_cancels_the_work(rig: ClockRig) -> None:
    clock = rig.clock
    work_started = asyncio.Event()
    outcome: list[str] = []

    async def slow_work() -> None:
        work_started.set()
        try:
            await clock.sleep(rig.secs(50))
        except asyncio.CancelledError:
            outcome.append("cancelled")
            raise

    waiter = asyncio.create_task(wait_for(clock, slow_work(), timeout_secs=rig.secs(40)))
    await work_started.wait()
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert outcome == ["cancelled"]


async def _await(aw: Awaitable[T]) -> T:
    return await aw
