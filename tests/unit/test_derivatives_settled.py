"""A poll reads a source whose answer is at hand (``CachedSource.answer_now``: settled for good, or
a value within its TTL) without a task of its own, and the run is the same as one that reads every
source: same readings, same reads, and every step on the same turn of the event loop as the other
tasks'."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from property_budget import examples

from core.bus import EventBus
from core.clock import VirtualClock
from derivatives.cache import Cached, CachedSource, CachePolicy, SourceNeverAvailableError
from derivatives.fields import CONTEXT_FIELDS
from derivatives.monitor import ContextField, DerivativesMonitor

EPOCH_MS = 1_740_787_200_000
FIELDS = [name for name in CONTEXT_FIELDS if name != "derivatives_signal"]
VALUES: dict[str, Any] = {
    "funding_rates": {"BTC/USDT": 0.0001, "ETH/USDT": -0.0002},
    "fear_greed": {"value": 40},
}


class Live:
    """A source with an answer that takes ``turns`` turns of the loop; its reads are traced."""

    def __init__(self, name: str, turns: int, trace: list[Any]) -> None:
        self.name = name
        self._turns = turns
        self._trace = trace

    async def read(self) -> Cached[Any]:
        self._trace.append(("read", self.name))
        for _ in range(self._turns):
            await asyncio.sleep(0)
        self._trace.append(("answered", self.name))
        value = VALUES.get(self.name)
        return Cached(value, None if value is not None else "none today", EPOCH_MS)


class Hidden:
    """A reader over a source that does not say its answer is at hand: it is always read."""

    def __init__(self, source: CachedSource[Any]) -> None:
        self.name = source.name
        self._source = source

    async def read(self) -> Cached[Any]:
        return await self._source.read()


async def _refused(name: str, clock: VirtualClock) -> CachedSource[Any]:
    async def fetch() -> Any:
        raise SourceNeverAvailableError(f"{name}: not in the recording")

    source: CachedSource[Any] = CachedSource(name, fetch, clock, CachePolicy(ttl_secs=60.0))
    await source.read()
    assert source.settled is not None
    return source


async def _fresh(name: str, clock: VirtualClock, ttl_secs: float) -> CachedSource[Any]:
    """A source with a value fetched now, fresh for ``ttl_secs``."""

    async def fetch() -> Any:
        return VALUES.get(name, {})

    source: CachedSource[Any] = CachedSource(name, fetch, clock, CachePolicy(ttl_secs=ttl_secs))
    await source.read()
    return source


async def _run(kinds: list[int | str | None], polls: int, *, hide: bool) -> list[Any]:
    """Fields whose kind is None are settled, "fresh" a value fetched (fresh for a poll or two,
    then asked again), else live with that many turns; ``polls`` polls a minute apart, with
    another task counting the loop's turns meanwhile."""
    clock = VirtualClock(EPOCH_MS)
    trace: list[Any] = []
    fields = []
    for name, kind in zip(FIELDS, kinds, strict=False):
        if isinstance(kind, int):
            fields.append(ContextField(name, Live(name, kind, trace)))
        else:
            source = (
                await _refused(name, clock) if kind is None else await _fresh(name, clock, 90.0)
            )
            fields.append(ContextField(name, Hidden(source) if hide else source))
    monitor = DerivativesMonitor(clock, EventBus(), fields)

    async def turns() -> None:
        for turn in range(12 * polls):
            trace.append(("turn", turn))
            await asyncio.sleep(0)

    async def poll() -> None:
        for _ in range(polls):
            reading = await monitor.poll_once()
            trace.append(("reading", dict(reading.values), dict(reading.unavailable)))
            await clock.advance(60.0)

    await asyncio.gather(turns(), poll())
    return trace


@settings(max_examples=examples(80), deadline=None)
@given(
    kinds=st.lists(
        st.one_of(st.none(), st.just("fresh"), st.integers(0, 3)),
        min_size=1,
        max_size=len(FIELDS),
    ),
    polls=st.integers(1, 3),
)
def test_leaving_sources_at_hand_out_of_the_gather_is_the_same_run(
    kinds: list[int | str | None], polls: int
) -> None:
    every_read = asyncio.run(_run(kinds, polls, hide=True))
    settled_unread = asyncio.run(_run(kinds, polls, hide=False))
    assert settled_unread == every_read


def test_a_settled_source_is_not_read_again() -> None:
    async def scenario() -> int:
        clock = VirtualClock(EPOCH_MS)
        refused = await _refused("basis", clock)
        trace: list[Any] = []
        monitor = DerivativesMonitor(
            clock,
            EventBus(),
            [
                ContextField("funding_rates", Live("funding_rates", 1, trace)),
                ContextField("basis", refused),
            ],
        )
        reading = await monitor.poll_once()
        assert reading.unavailable["basis"] == "basis: not in the recording"
        assert reading.values["funding_rates"] == VALUES["funding_rates"]
        return refused.requests

    assert asyncio.run(scenario()) == 1  # the first read's, which found out
