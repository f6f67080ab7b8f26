"""What both supervisor test files need: driving the virtual clock until a condition holds."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from core.clock import VirtualClock


async def until(
    predicate: Callable[[], bool], clock: VirtualClock, max_steps: int = 10_000
) -> None:
    """Drive virtual time until ``predicate()`` holds."""
    for _ in range(max_steps):
        if predicate():
            return
        if not await clock.step():
            await asyncio.sleep(0)
    raise AssertionError("condition never became true")
