"""ScaledClock.absorb_stalls: a stall of the process is not simulated time. While the watch runs,
of any real interval between two readings of the clock at most the cap counts, so the
simulator's market waits for a daemon that was not running instead of sending in one burst what
fell due meanwhile (the replay-parity test failed that way on a loaded machine)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Iterator

import pytest

from core.scaled_clock import ScaledClock

SPEED = 100.0
CAP_SECS = 0.05


class FakeReal:
    """A real-time source the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1_000.0
        self.reads = 0

    def __call__(self) -> float:
        self.reads += 1
        return self.now


@contextlib.asynccontextmanager
async def watching(clock: ScaledClock, tick_secs: float = 0.01) -> AsyncIterator[None]:
    watch = asyncio.create_task(clock.absorb_stalls(CAP_SECS, tick_secs))
    await asyncio.sleep(0)  # the watch has started
    try:
        yield
    finally:
        watch.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watch


@contextlib.contextmanager
def watched_sync(clock: ScaledClock) -> Iterator[None]:
    """The watch's state without its task, for readings the test makes itself."""
    clock._stall_cap_secs = CAP_SECS
    try:
        yield
    finally:
        clock._stall_cap_secs = None


def test_without_the_watch_every_real_second_counts() -> None:
    real = FakeReal()
    clock = ScaledClock(0, SPEED, real_secs=real)
    real.now += 3.0
    assert clock.monotonic_secs() == pytest.approx(3.0 * SPEED)
    assert clock.stalls == 0


def test_a_gap_between_readings_over_the_cap_counts_as_the_cap() -> None:
    real = FakeReal()
    clock = ScaledClock(0, SPEED, real_secs=real)
    with watched_sync(clock):
        for _ in range(10):  # readings 10 ms apart: all of it counts
            real.now += 0.01
            clock.monotonic_secs()
        assert clock.monotonic_secs() == pytest.approx(0.1 * SPEED)
        real.now += 2.0  # the process did not run for two seconds
        assert clock.monotonic_secs() == pytest.approx((0.1 + CAP_SECS) * SPEED)
        real.now += 0.01
        assert clock.monotonic_secs() == pytest.approx((0.11 + CAP_SECS) * SPEED)
    assert clock.stalls == 1
    assert clock.stalled_secs == pytest.approx(2.0 - CAP_SECS)


def test_a_held_stretch_is_not_counted_as_a_stall_as_well() -> None:
    real = FakeReal()
    clock = ScaledClock(0, SPEED, real_secs=real)
    with watched_sync(clock):
        real.now += 0.01
        with clock.hold():
            real.now += 5.0
        real.now += 0.01
        assert clock.monotonic_secs() == pytest.approx(0.02 * SPEED)
    assert clock.stalls == 0


async def test_the_watch_reads_the_clock_while_the_loop_is_idle() -> None:
    real = FakeReal()
    clock = ScaledClock(0, SPEED, real_secs=real)
    async with watching(clock, tick_secs=0.001):
        reads = real.reads
        while real.reads < reads + 3:  # nobody but the watch reads the clock here
            await asyncio.sleep(0.001)


async def test_a_blocked_event_loop_moves_simulated_time_by_the_cap_at_most() -> None:
    clock = ScaledClock(0, SPEED)
    async with watching(clock):
        before = clock.monotonic_secs()
        time.sleep(0.3)  # the stall under test: the loop cannot run
        after = clock.monotonic_secs()
    assert after - before <= CAP_SECS * SPEED + 1e-9
    assert clock.stalls >= 1 and clock.stalled_secs >= 0.3 - CAP_SECS


async def test_without_the_watch_a_blocked_loop_moves_simulated_time_by_all_of_it() -> None:
    clock = ScaledClock(0, SPEED)
    before = clock.monotonic_secs()
    time.sleep(0.3)
    assert clock.monotonic_secs() - before >= 0.3 * SPEED


async def test_a_sleeper_due_during_a_stall_wakes_at_its_simulated_deadline() -> None:
    clock = ScaledClock(0, SPEED)
    async with watching(clock):
        deadline = clock.monotonic_secs() + 10.0  # 100 ms of real time
        sleeper = asyncio.create_task(clock.sleep(10.0))
        await asyncio.sleep(0)
        time.sleep(0.3)  # its real-time timer falls due inside the stall
        await sleeper
        assert clock.monotonic_secs() >= deadline


def test_the_tick_must_be_shorter_than_the_cap() -> None:
    clock = ScaledClock(0, SPEED)
    with pytest.raises(ValueError, match="tick_secs < cap_secs"):
        asyncio.run(clock.absorb_stalls(cap_secs=0.01, tick_secs=0.01))
