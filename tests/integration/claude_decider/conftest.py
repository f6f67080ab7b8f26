"""Fixtures of the ClaudeDecider tests: the fake Messages API on loopback, an instant clock, and
deciders built on them (closed at teardown)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from fakes.claude_support import AT_MS, Make, make_decider
from fakes.instant_clock import InstantClock
from fakes.messages_api import FakeMessagesApi

from agent.claude import ClaudeDecider


@pytest.fixture
async def api() -> AsyncIterator[FakeMessagesApi]:
    async with FakeMessagesApi() as server:
        yield server


@pytest.fixture
def clock() -> InstantClock:
    return InstantClock(epoch_ms=AT_MS)


@pytest.fixture
async def make(api: FakeMessagesApi, clock: InstantClock) -> AsyncIterator[Make]:
    """Build deciders on the fake API; their HTTP clients are closed at teardown."""
    made: list[ClaudeDecider] = []

    def build(**kwargs: Any) -> ClaudeDecider:
        made.append(make_decider(api.base_url, clock, **kwargs))
        return made[-1]

    yield build
    for decider in made:
        await decider.aclose()
