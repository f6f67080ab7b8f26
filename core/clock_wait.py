"""``wait_for`` on a ``Clock``: a timeout in the clock's time (virtual in replay and tests)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from core.clock import Clock

T = TypeVar("T")


async def wait_for(clock: Clock, awaitable: Awaitable[T], timeout_secs: float) -> T:
    """Like ``asyncio.wait_for`` but the timeout runs on ``clock``. Raises ``TimeoutError``.

    On timeout (or when the caller is cancelled) the work is cancelled and awaited until it has
    unwound, so its cleanup is finished when this returns. A caller cancelled while the work unwinds
    sees ``CancelledError``, never a ``TimeoutError`` in its place.
    """
    work = asyncio.ensure_future(awaitable)
    timer = asyncio.ensure_future(clock.sleep(timeout_secs))
    try:
        done, _ = await asyncio.wait({work, timer}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        await _cancel_and_wait(work)
        raise
    finally:
        timer.cancel()
    if work in done:
        return work.result()
    await _cancel_and_wait(work)
    if work.cancelled():
        raise TimeoutError(f"timed out after {timeout_secs} s of clock time")
    # it finished (or failed) on its own before the cancellation reached it, as asyncio.wait_for
    return work.result()


async def _cancel_and_wait(task: asyncio.Future[T]) -> None:
    task.cancel()
    await asyncio.wait({task})
