"""What only the virtual clock (and the scaled clock's construction) promises, beyond the shared
contract in ``test_clock_contract.py``."""

from __future__ import annotations

import asyncio
from typing import TypeVar

import pytest
from fakes.tasks import stop_tasks

from core.clock import VirtualClock
from core.clock_wait import wait_for
from core.scaled_clock import ScaledClock

T = TypeVar("T")


async def _settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def test_virtual_time_only_moves_when_driven() -> None:
    clock = VirtualClock(epoch_ms=1_000)
    woke = asyncio.Event()

    async def sleeper() -> None:
        await clock.sleep(0.001)
        woke.set()

    task = asyncio.create_task(sleeper())
    await _settle()
    assert (clock.now_ms(), clock.monotonic_secs()) == (1_000, 0.0)
    assert not woke.is_set()
    assert clock.pending_sleepers == 1
    await clock.advance(0.001)
    await task
    assert clock.now_ms() == 1_001
    assert clock.monotonic_secs() == 0.001


async def test_virtual_sleep_does_not_wake_one_tick_early() -> None:
    clock = VirtualClock()
    task = asyncio.create_task(clock.sleep(10.0))
    await clock.advance(9.999)
    assert not task.done()
    await clock.advance(0.001)
    assert task.done()


async def test_step_jumps_to_the_next_deadline_and_wakes_only_that_sleeper() -> None:
    clock = VirtualClock(epoch_ms=0)
    woke: list[float] = []

    async def sleeper(secs: float) -> None:
        await clock.sleep(secs)
        woke.append(clock.monotonic_secs())

    tasks = [asyncio.create_task(sleeper(s)) for s in (5.0, 2.0, 9.0)]
    await _settle()
    assert clock.next_deadline_secs() == 2.0
    assert await clock.step()
    assert woke == [2.0]
    assert clock.now_ms() == 2_000
    assert await clock.step()
    assert await clock.step()
    assert woke == [2.0, 5.0, 9.0]
    assert not await clock.step()  # nobody left asleep: time stays put
    assert clock.monotonic_secs() == 9.0
    await asyncio.gather(*tasks)


async def test_step_skips_a_cancelled_sleepers_deadline() -> None:
    clock = VirtualClock()
    early = asyncio.create_task(clock.sleep(1.0))
    late = asyncio.create_task(clock.sleep(3.0))
    await _settle()
    early.cancel()
    await _settle()
    assert clock.pending_sleepers == 1
    assert clock.next_deadline_secs() == 3.0
    assert await clock.step()
    assert clock.monotonic_secs() == 3.0
    assert late.done()


async def test_woken_tasks_observe_now_equal_to_their_own_deadline() -> None:
    clock = VirtualClock(epoch_ms=1_700_000_000_000)
    observed: dict[float, tuple[float, int]] = {}

    async def sleeper(secs: float) -> None:
        await clock.sleep(secs)
        observed[secs] = (clock.monotonic_secs(), clock.now_ms())

    tasks = [asyncio.create_task(sleeper(s)) for s in (30.0, 0.25, 7.5, 7.5, 120.0)]
    await _settle()
    await clock.advance(1_000.0)  # one big jump must still wake each at its own instant
    await asyncio.gather(*tasks)
    for secs, (mono, now) in observed.items():
        assert mono == secs
        assert now == 1_700_000_000_000 + round(secs * 1000)
    assert clock.monotonic_secs() == 1_000.0


async def test_sleepers_registered_during_an_advance_wake_in_it_if_due() -> None:
    clock = VirtualClock()
    wakes: list[tuple[str, float]] = []

    async def ticker(name: str, period: float) -> None:
        while True:
            await clock.sleep(period)
            wakes.append((name, clock.monotonic_secs()))

    async def chain() -> None:
        await clock.sleep(1.0)
        wakes.append(("chain", clock.monotonic_secs()))
        await clock.sleep(2.0)  # registered while advance(5) runs; due at 3 -> same advance
        wakes.append(("chain", clock.monotonic_secs()))
        await clock.sleep(10.0)  # due at 13 -> not in this advance
        wakes.append(("chain", clock.monotonic_secs()))

    tasks = [asyncio.create_task(ticker("tick", 2.0)), asyncio.create_task(chain())]
    await _settle()
    await clock.advance(5.0)
    assert wakes == [
        ("chain", 1.0),
        ("tick", 2.0),
        ("chain", 3.0),
        ("tick", 4.0),
    ]
    assert clock.monotonic_secs() == 5.0
    assert clock.next_deadline_secs() == 6.0
    await stop_tasks(*tasks)


async def test_a_zero_sleep_during_advance_wakes_at_the_same_instant() -> None:
    clock = VirtualClock()
    seen: list[float] = []

    async def yielder() -> None:
        await clock.sleep(2.0)
        for _ in range(3):
            await clock.sleep(0)
            seen.append(clock.monotonic_secs())

    task = asyncio.create_task(yielder())
    await _settle()
    await clock.advance(2.0)
    await task
    assert seen == [2.0, 2.0, 2.0]


async def test_advance_to_the_past_never_moves_time_backwards() -> None:
    clock = VirtualClock(epoch_ms=5_000)
    await clock.advance_to(10.0)
    await clock.advance_to(3.0)
    await clock.advance(-1.0)
    assert clock.monotonic_secs() == 10.0
    assert clock.now_ms() == 15_000


def test_scaled_clock_rejects_a_non_positive_speed() -> None:
    for speed in (0.0, -1.0):
        with pytest.raises(ValueError, match="speed"):
            ScaledClock(epoch_ms=0, speed=speed)


def test_scaled_clock_starts_at_its_epoch() -> None:
    clock = ScaledClock(epoch_ms=1_740_787_200_000, speed=60.0)
    assert 1_740_787_200_000 <= clock.now_ms() < 1_740_787_200_000 + 60_000


async def test_wait_for_on_a_virtual_clock_never_looks_at_real_time() -> None:
    """A one-day timeout on the virtual clock completes as soon as the driver gets there."""
    clock = VirtualClock()
    never = asyncio.Event()
    waiter = asyncio.create_task(wait_for(clock, never.wait(), timeout_secs=86_400.0))
    await _settle()
    await clock.advance(86_399.0)
    assert not waiter.done()
    await clock.advance(1.0)
    with pytest.raises(TimeoutError):
        await waiter


async def test_wait_for_waits_for_the_cancelled_work_to_finish_its_cleanup() -> None:
    clock = VirtualClock()
    cleaned_up_at: list[float] = []

    async def work_with_slow_cleanup() -> None:
        try:
            await clock.sleep(100.0)
        except asyncio.CancelledError:
            await clock.sleep(1.0)  # e.g. closing a connection politely
            cleaned_up_at.append(clock.monotonic_secs())
            raise

    waiter = asyncio.create_task(wait_for(clock, work_with_slow_cleanup(), timeout_secs=5.0))
    await clock.advance(5.0)
    assert not waiter.done()  # still waiting for the work to unwind
    await clock.advance(1.0)
    with pytest.raises(TimeoutError):
        await waiter
    assert cleaned_up_at == [6.0]


async def test_cancelling_wait_for_while_the_work_unwinds_is_not_turned_into_a_timeout() -> None:
    clock = VirtualClock()

    async def work_with_slow_cleanup() -> None:
        try:
            await clock.sleep(100.0)
        except asyncio.CancelledError:
            await clock.sleep(1.0)
            raise

    waiter = asyncio.create_task(wait_for(clock, work_with_slow_cleanup(), timeout_secs=5.0))
    await clock.advance(5.0)  # timed out; the work is unwinding
    assert not waiter.done()
    waiter.cancel()  # the caller itself is cancelled now: it must see CancelledError
    await clock.advance(1.0)
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert waiter.cancelled()


async def test_a_task_whose_work_under_wait_for_sleeps_on_the_clock_is_parked() -> None:
    """A replay moves time only while every busy task waits on the clock, and asks it of the
    caller's task: the work ran in a task of wait_for's own, so a position review whose retry
    backoff slept on the clock was never parked, and the replay stood still for ever."""
    clock = VirtualClock()

    async def review_with_a_backoff() -> str:
        await clock.sleep(2.0)  # a retry's backoff after a 529
        return "answered"

    caller = asyncio.create_task(wait_for(clock, review_with_a_backoff(), timeout_secs=60.0))
    await _settle()
    assert clock.is_parked(caller)
    await clock.advance(2.0)
    assert await caller == "answered"
    assert clock.pending_sleepers == 0
