"""fakes.virtual_time.drive: the work's result at the instant it finished, and a hang guard that
names the work and leaves no task behind."""

from __future__ import annotations

import asyncio

import pytest
from fakes.virtual_time import drive

from core.clock import VirtualClock


async def _backoff(clock: VirtualClock) -> str:
    await asyncio.sleep(0)  # not asleep on the clock at once, as work on a socket or thread is not
    for secs in (0.5, 1.0, 2.0):
        await clock.sleep(secs)
    return "written"


async def _retry_for_ever(clock: VirtualClock) -> None:
    while True:
        await clock.sleep(1.0)


async def test_the_work_runs_to_its_end_on_virtual_time() -> None:
    clock = VirtualClock()
    assert await drive(clock, _backoff(clock)) == "written"
    assert clock.monotonic_secs() == 3.5


async def test_work_that_never_ends_fails_by_name_and_is_cancelled() -> None:
    clock = VirtualClock()
    work = asyncio.ensure_future(_retry_for_ever(clock))
    with pytest.raises(AssertionError, match="_retry_for_ever never finished: 10 steps"):
        await drive(clock, work, max_steps=10)
    with pytest.raises(asyncio.CancelledError):
        await work
    assert clock.monotonic_secs() == 11.0
