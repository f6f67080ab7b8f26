"""Running a piece of work to its end on a ``VirtualClock``: time moves only when the work sleeps.

A retry's backoff, a replay's next tick, a poll's period all sleep on the clock; the test moves
the clock to each sleeper's deadline in turn until the work is done. Only these steps count
against the hang guard: a step moves virtual time, so how many a run takes is the same on any
host, and work that sleeps for ever (a retry that never gives up) trips the guard. While nobody
sleeps on the clock the work is on its way to its next sleep or waiting on a socket or a thread,
for as many loop turns as the host takes; the test's timeout bounds that wait.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

from core.clock import VirtualClock

T = TypeVar("T")

#: steps of virtual time a drive may take before the work is declared hung
MAX_DRIVE_STEPS = 100_000


async def drive(clock: VirtualClock, work: Awaitable[T], max_steps: int = MAX_DRIVE_STEPS) -> T:
    """Run ``work`` as a task, moving ``clock`` to each next sleeper's deadline until it is done,
    and return its result (or raise its error). Past ``max_steps`` steps, or if the drive itself
    is cancelled, the task is cancelled."""
    task = asyncio.ensure_future(work)
    name = _name(task)
    steps = 0
    try:
        while not task.done():
            if not await clock.step():
                await asyncio.sleep(0)  # nobody sleeps yet: let the work reach its sleep
            elif (steps := steps + 1) > max_steps:
                raise AssertionError(f"{name} never finished: {max_steps} steps of virtual time")
    finally:
        if not task.done():
            task.cancel()
    return task.result()


def _name(task: asyncio.Future[Any]) -> str:
    """The work's function ("MemoryWriter.flush"), for the guard's message."""
    coro = task.get_coro() if isinstance(task, asyncio.Task) else None
    return getattr(coro, "__qualname__", None) or repr(task)


__all__ = ["MAX_DRIVE_STEPS", "drive"]
