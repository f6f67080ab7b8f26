"""EventBus: bounded queues (drop oldest, coalesce) and the accounting property test."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest
from bus_support import Ping, key_of, number_of, stop_task, until
from hypothesis import given, settings
from hypothesis import strategies as st
from property_budget import examples

from core.bus import EventBus, Overflow, QueuedSubscriber
from core.events import Event

# ---------------------------------------------------------------------------------------------
# overflow


async def test_drop_oldest_evicts_the_oldest_pending_events_and_counts_them() -> None:
    bus = EventBus()
    got: list[int] = []

    async def slow(event: Event) -> None:
        assert isinstance(event, Ping)
        got.append(event.n)

    sub = bus.subscribe_queued(Ping.topic, slow, name="slow", maxsize=3)
    for n in range(5):  # the consumer is not running yet: everything queues
        bus.publish(Ping(n=n))
    assert len(sub) == 3
    assert sub.stats.dropped == 2
    runner = asyncio.create_task(bus.run())
    await bus.drain()
    assert got == [2, 3, 4]
    assert bus.stats()[f"{Ping.topic}:slow"] == {
        "delivered": 3,
        "failed": 0,
        "dropped": 2,
        "coalesced": 0,
        "queued": 0,
    }
    await stop_task(runner)


async def test_coalesce_replaces_a_pending_event_of_the_same_key_in_place() -> None:
    bus = EventBus()
    got: list[tuple[str, int]] = []

    async def handler(event: Event) -> None:
        assert isinstance(event, Ping)
        got.append((event.key, event.n))

    sub = bus.subscribe_queued(
        Ping.topic, handler, maxsize=10, overflow=Overflow.COALESCE, key=key_of
    )
    for n, key in enumerate(["BTC", "ETH", "BTC", "SOL", "BTC"]):
        bus.publish(Ping(n=n, key=key))
    assert len(sub) == 3
    assert sub.stats.coalesced == 2
    runner = asyncio.create_task(bus.run())
    await bus.drain()
    # BTC kept its place in line (first) but carries its newest value
    assert got == [("BTC", 4), ("ETH", 1), ("SOL", 3)]
    await stop_task(runner)


async def test_coalesce_with_a_full_queue_and_a_new_key_drops_the_oldest_key() -> None:
    bus = EventBus()
    got: list[tuple[str, int]] = []

    async def handler(event: Event) -> None:
        assert isinstance(event, Ping)
        got.append((event.key, event.n))

    sub = bus.subscribe_queued(
        Ping.topic, handler, maxsize=2, overflow=Overflow.COALESCE, key=key_of
    )
    for n, key in enumerate(["a", "b", "c", "b"]):
        bus.publish(Ping(n=n, key=key))
    assert (sub.stats.dropped, sub.stats.coalesced, len(sub)) == (1, 1, 2)
    runner = asyncio.create_task(bus.run())
    await bus.drain()
    assert got == [("b", 3), ("c", 2)]
    await stop_task(runner)


async def test_coalesce_without_a_key_function_keeps_only_the_latest_event_of_the_topic() -> None:
    bus = EventBus()
    got: list[int] = []

    async def handler(event: Event) -> None:
        assert isinstance(event, Ping)
        got.append(event.n)

    bus.subscribe_queued(Ping.topic, handler, overflow=Overflow.COALESCE)
    for n in range(10):
        bus.publish(Ping(n=n))
    runner = asyncio.create_task(bus.run())
    await bus.drain()
    assert got == [9]
    await stop_task(runner)


def test_a_queue_must_hold_at_least_one_event() -> None:
    async def handler(event: Event) -> None:
        return None

    with pytest.raises(ValueError, match="maxsize"):
        QueuedSubscriber("x", handler, 0, Overflow.DROP_OLDEST, lambda e: e.topic)
    with pytest.raises(ValueError, match="maxsize"):
        EventBus().subscribe_queued(Ping.topic, handler, maxsize=0)


# A random interleaving of publishes and "let the slow consumer handle k events". The consumer
# blocks on a token per event, so the test decides exactly how far it gets.
_publish = st.tuples(st.just("publish"), st.sampled_from("abcd"))
_consume = st.tuples(st.just("consume"), st.integers(min_value=0, max_value=4))
_ops = st.lists(st.one_of(_publish, _publish, _consume), max_size=80)


@dataclass
class _SlowConsumer:
    tokens: asyncio.Queue[None] = field(default_factory=asyncio.Queue)
    taken: int = 0  # events the consumer took off the queue (delivered or in its hands)
    blocked: bool = False
    delivered: list[Ping] = field(default_factory=list)

    async def handle(self, event: Event) -> None:
        assert isinstance(event, Ping)
        self.taken += 1
        self.blocked = True
        await self.tokens.get()
        self.blocked = False
        self.delivered.append(event)


async def _property_scenario(
    ops: list[tuple[str, object]], overflow: Overflow, maxsize: int
) -> None:
    bus = EventBus()
    consumer = _SlowConsumer()
    sub = bus.subscribe_queued(
        Ping.topic, consumer.handle, maxsize=maxsize, overflow=overflow, key=key_of
    )
    runner = asyncio.create_task(bus.run())

    def settled() -> bool:
        # nothing more can happen without a new token or a new event
        return (consumer.blocked and consumer.tokens.empty()) or (
            not consumer.blocked and len(sub) == 0
        )

    def check_accounting(published: int) -> None:
        s = sub.stats
        assert len(sub) <= maxsize
        assert consumer.taken + s.dropped + s.coalesced + len(sub) == published
        assert s.delivered == len(consumer.delivered)
        assert consumer.taken - s.delivered in (0, 1)  # at most one event in the handler's hands

    published = 0
    for kind, arg in ops:
        if kind == "publish":
            assert isinstance(arg, str)
            bus.publish(Ping(n=published, key=arg))
            published += 1
            assert len(sub) <= maxsize  # memory is bounded at every step
        else:
            assert isinstance(arg, int)
            for _ in range(arg):
                consumer.tokens.put_nowait(None)
            await until(settled, "the consumer settles")
        check_accounting(published)

    # let everything through, then the books must balance exactly
    while not (len(sub) == 0 and not consumer.blocked):
        consumer.tokens.put_nowait(None)
        await until(settled, "the consumer settles")
    await bus.drain()
    s = sub.stats
    assert s.delivered + s.dropped + s.coalesced + len(sub) == published
    assert s.failed == 0
    ns = [number_of(e) for e in consumer.delivered]
    if overflow is Overflow.DROP_OLDEST:
        assert ns == sorted(ns)  # what survives is delivered in publish order
        assert s.coalesced == 0
    else:
        for key in "abcd":  # per key, values only move forward
            of_key = [number_of(e) for e in consumer.delivered if e.key == key]
            assert of_key == sorted(of_key)
    await stop_task(runner)


@settings(max_examples=examples(120), deadline=None)
@given(
    ops=_ops,
    overflow=st.sampled_from([Overflow.DROP_OLDEST, Overflow.COALESCE]),
    maxsize=st.integers(min_value=1, max_value=5),
)
def test_queues_stay_bounded_and_every_published_event_is_accounted_for(
    ops: list[tuple[str, object]], overflow: Overflow, maxsize: int
) -> None:
    asyncio.run(_property_scenario(ops, overflow, maxsize))
