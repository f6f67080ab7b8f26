"""``wait_for`` on a ``Clock``: a timeout in the clock's time (virtual in replay and tests)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from core.clock import Clock

T = TypeVar("T")


async def wait_for(clock: Clock, awaitable: Awaitable[T], timeout_secs: float) -> T:
    """Like ``asyncio.wait_for`` but the timeout runs on ``clock``. Raises ``TimeoutError``.

    The work runs in the caller's own task, and a timer task cancels that task when the time is
    up (as ``asyncio.timeout`` does), so the work's cleanup is finished when this returns. A
    caller cancelled from outside as well sees ``CancelledError``, never a ``TimeoutError`` in its
    place.

    In the caller's task, not one of its own: a replay moves the virtual clock only while every
    busy task waits on it, and asks that of the caller's task. A position review's retry backoff
    slept in a task of this function's, the review's task waited on that task and not on the
    clock, and the replay stood still for ever at a reviewer's first 529.
    """
    task = asyncio.current_task()
    if task is None:
        raise RuntimeError("wait_for needs a task")
    expired = False

    def expire(timer: asyncio.Future[None]) -> None:
        nonlocal expired
        if not timer.cancelled():
            expired = True
            task.cancel()

    timer = asyncio.ensure_future(clock.sleep(timeout_secs))
    timer.add_done_callback(expire)
    try:
        await asyncio.sleep(0)  # the timer's deadline is set before the work can set its own
        result = await awaitable
    except asyncio.CancelledError:
        if expired and task.uncancel() == 0:  # only the timer's cancellation: a timeout
            raise TimeoutError(f"timed out after {timeout_secs} s of clock time") from None
        raise
    finally:
        timer.remove_done_callback(expire)
        timer.cancel()
    if expired:  # the work swallowed the timer's cancellation and finished: its result stands
        task.uncancel()
    return result


__all__ = ["wait_for"]
