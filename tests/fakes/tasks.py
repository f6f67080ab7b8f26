"""Stopping the background tasks a test started, without losing what killed one of them.

``cancel`` then ``gather(..., return_exceptions=True)`` is the usual way, and it drops the error
of a task that had died before the cancel: a loop under test that raised (or took pytest-timeout's
alarm, a ``BaseException`` asyncio keeps as the task's result) then reads as a loop that merely
stopped doing things, and a test comparing what it did fails far from the cause or passes on
less work than it thinks. ``stop_tasks`` raises that error instead.
"""

from __future__ import annotations

import asyncio
from typing import Any


async def stop_tasks(*tasks: asyncio.Task[Any]) -> None:
    """Cancel ``tasks``, wait until each has ended, and raise the first error one ended on
    (before the cancel or while handling it); a task that returned is fine."""
    for task in tasks:
        task.cancel()
    outcomes = await asyncio.gather(*tasks, return_exceptions=True)
    for outcome in outcomes:
        if isinstance(outcome, BaseException) and not isinstance(outcome, asyncio.CancelledError):
            raise outcome


__all__ = ["stop_tasks"]
