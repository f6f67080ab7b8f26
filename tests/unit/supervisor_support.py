"""What the supervisor test files share: driving the virtual clock until a condition holds, and a
loop that swallows its cancellation."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

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


def swallowing(release: asyncio.Event) -> Callable[[], Awaitable[None]]:
    """A loop that swallows its cancellation until ``release`` is set: a bug the shutdown
    deadline must survive."""

    async def stubborn() -> None:
        while not release.is_set():
            try:
                await release.wait()
            except asyncio.CancelledError:
                continue

    return stubborn
