"""ScaledClock.hold: simulated time stands still while held, and sleepers wake only once their
deadline has passed in simulated time (the simulator's daemon holds the clock during regime fits)."""

from __future__ import annotations

import asyncio
import time

from core.scaled_clock import ScaledClock

SPEED = 100.0  # one simulated second = 10 ms of real time


async def _real_time_passes(clock: ScaledClock, real_secs: float) -> None:
    """Wait (real time) without reading ``clock``: what the test checks must hold however long."""
    await asyncio.sleep(real_secs)


async def test_time_stands_still_while_held_and_runs_on_after() -> None:
    clock = ScaledClock(0, SPEED)
    with clock.hold():
        assert clock.held
        frozen = clock.monotonic_secs()
        await _real_time_passes(clock, 0.03)
        assert clock.monotonic_secs() == frozen
        with clock.hold():  # nested
            pass
        assert clock.held and clock.monotonic_secs() == frozen
        real_before = time.monotonic()
    counted = clock.monotonic_secs() - frozen
    real_after = time.monotonic()
    # the 30 ms held were not counted: no more than the real time around the hold's end was
    # (measured, not a fixed bound, which a stall of the process there would exceed)
    assert counted <= (real_after - real_before) * SPEED + 1e-9
    while clock.monotonic_secs() <= frozen:
        await asyncio.sleep(0.001)  # and it runs again


async def test_a_sleeper_due_during_a_hold_wakes_after_it_at_its_simulated_deadline() -> None:
    clock = ScaledClock(0, SPEED)
    deadline = clock.monotonic_secs() + 1.0
    sleeper = asyncio.create_task(clock.sleep(1.0))  # 10 ms of real time if nothing holds it
    await asyncio.sleep(0)
    with clock.hold():
        await _real_time_passes(clock, 0.05)
        assert not sleeper.done(), "woke while time stood still"
    await sleeper
    assert clock.monotonic_secs() >= deadline


async def test_without_a_hold_sleep_is_unchanged() -> None:
    clock = ScaledClock(0, SPEED)
    deadline = clock.monotonic_secs() + 0.5
    await clock.sleep(0.5)
    assert clock.monotonic_secs() >= deadline - 1e-3
    await clock.sleep(0)  # still yields
