"""Events and helpers shared by the EventBus tests (test_bus_*.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import ClassVar

import pytest

from core.events import Event

MAX_TURNS = 10_000


class Ping(Event):
    topic: ClassVar[str] = "test.ping"
    n: int
    key: str = ""


class Pong(Event):
    topic: ClassVar[str] = "test.pong"
    n: int


def number_of(event: Event) -> int:
    assert isinstance(event, Ping | Pong)
    return event.n


def key_of(event: Event) -> str:
    assert isinstance(event, Ping)
    return event.key


async def until(predicate: Callable[[], bool], what: str) -> None:
    """Give the event loop turns until ``predicate`` holds (a condition, never a fixed sleep)."""
    for _ in range(MAX_TURNS):
        if predicate():
            return
        await asyncio.sleep(0)
    raise AssertionError(f"never happened: {what}")


async def stop_task(task: asyncio.Task[None]) -> None:
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
