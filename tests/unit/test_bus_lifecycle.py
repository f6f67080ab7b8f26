"""EventBus: drain, stats, and the run loop (cancel, restart, late subscribers)."""

from __future__ import annotations

import asyncio

import pytest
from bus_support import Ping, Pong, stop_task, until

from core.bus import EventBus
from core.events import Event

# ---------------------------------------------------------------------------------------------
# drain, stats, run


async def test_drain_returns_at_once_when_nothing_is_pending() -> None:
    bus = EventBus()
    await bus.drain()  # no subscribers at all

    async def handler(event: Event) -> None:
        return None

    bus.subscribe_queued(Ping.topic, handler)
    await bus.drain()  # a subscriber, nothing published (no consumer needed)


async def test_drain_waits_for_the_handler_to_finish_not_just_the_queue_to_empty() -> None:
    bus = EventBus()
    release = asyncio.Event()
    finished: list[int] = []

    async def slow(event: Event) -> None:
        assert isinstance(event, Ping)
        await release.wait()
        finished.append(event.n)

    sub = bus.subscribe_queued(Ping.topic, slow)
    runner = asyncio.create_task(bus.run())
    bus.publish(Ping(n=7))
    drained = asyncio.create_task(bus.drain())
    await until(lambda: len(sub) == 0, "the consumer takes the event")
    for _ in range(20):
        await asyncio.sleep(0)
    assert not drained.done()  # the event is in the handler's hands, not handled yet
    release.set()
    await drained
    assert finished == [7]
    await stop_task(runner)


async def test_drain_follows_events_that_queued_handlers_publish_to_each_other() -> None:
    bus = EventBus()
    trail: list[str] = []

    async def on_ping(event: Event) -> None:
        assert isinstance(event, Ping)
        trail.append(f"ping{event.n}")
        bus.publish(Pong(n=event.n))

    async def on_pong(event: Event) -> None:
        assert isinstance(event, Pong)
        trail.append(f"pong{event.n}")
        if event.n < 3:
            bus.publish(Ping(n=event.n + 1))

    # subscribed in this order, a single pass over the subscribers would miss the ping it sends back
    bus.subscribe_queued(Ping.topic, on_ping)
    bus.subscribe_queued(Pong.topic, on_pong)
    runner = asyncio.create_task(bus.run())
    bus.publish(Ping(n=0))
    await bus.drain()
    assert trail == ["ping0", "pong0", "ping1", "pong1", "ping2", "pong2", "ping3", "pong3"]
    await stop_task(runner)


def test_stats_name_every_subscriber_by_topic_and_name() -> None:
    bus = EventBus()

    def counter(event: Event) -> None:
        return None

    async def consumer(event: Event) -> None:
        return None

    bus.subscribe(Ping.topic, counter)
    bus.subscribe_queued(Pong.topic, consumer, name="journal")
    bus.publish(Ping(n=1))
    bus.publish(Pong(n=1))
    bus.publish(Pong(n=2))
    stats = bus.stats()
    inline_key = f"{Ping.topic}:{counter.__qualname__}"
    assert set(stats) == {inline_key, f"{Pong.topic}:journal"}
    assert stats[inline_key] == {"delivered": 1, "failed": 0, "dropped": 0, "coalesced": 0}
    assert stats[f"{Pong.topic}:journal"]["queued"] == 2
    stats[inline_key]["delivered"] = 99  # a snapshot, not a live view
    assert bus.stats()[inline_key]["delivered"] == 1


def test_subscribers_with_the_same_name_get_separate_stats() -> None:
    bus = EventBus()
    bus.subscribe(Ping.topic, lambda e: None)
    bus.subscribe(Ping.topic, lambda e: None)

    async def consumer(event: Event) -> None:
        return None

    bus.subscribe_queued(Ping.topic, consumer, name="dup")
    bus.subscribe_queued(Ping.topic, consumer, name="dup")
    bus.publish(Ping(n=1))
    stats = bus.stats()
    assert len(stats) == 4
    assert sum(s["delivered"] for s in stats.values()) == 2  # the two inline ones
    assert sum(s.get("queued", 0) for s in stats.values()) == 2


async def test_cancelling_run_stops_every_consumer_including_one_mid_handler() -> None:
    bus = EventBus()
    in_handler = asyncio.Event()
    outcome: list[str] = []

    async def stuck(event: Event) -> None:
        in_handler.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            outcome.append("cancelled")
            raise

    async def idle(event: Event) -> None:
        return None

    bus.subscribe_queued(Ping.topic, stuck)
    bus.subscribe_queued(Pong.topic, idle)
    runner = asyncio.create_task(bus.run())
    bus.publish(Ping(n=1))
    await in_handler.wait()
    await stop_task(runner)
    assert outcome == ["cancelled"]
    assert runner.cancelled()


async def test_run_without_queued_subscribers_parks_until_cancelled() -> None:
    bus = EventBus()
    runner = asyncio.create_task(bus.run())
    for _ in range(20):
        await asyncio.sleep(0)
    assert not runner.done()
    await stop_task(runner)


async def test_a_queued_subscriber_added_while_running_is_consumed() -> None:
    bus = EventBus()
    got: list[int] = []

    async def late(event: Event) -> None:
        assert isinstance(event, Ping)
        got.append(event.n)

    runner = asyncio.create_task(bus.run())
    await asyncio.sleep(0)  # run() has started (with no queued subscribers yet)
    bus.subscribe_queued(Ping.topic, late)
    bus.publish(Ping(n=5))
    await bus.drain()
    assert got == [5]
    await stop_task(runner)


async def test_run_can_be_started_again_after_it_was_cancelled() -> None:
    bus = EventBus()
    got: list[int] = []

    async def handler(event: Event) -> None:
        assert isinstance(event, Ping)
        got.append(event.n)

    bus.subscribe_queued(Ping.topic, handler)
    first = asyncio.create_task(bus.run())
    bus.publish(Ping(n=1))
    await bus.drain()
    await stop_task(first)
    bus.publish(Ping(n=2))  # queued while nobody consumes
    second = asyncio.create_task(bus.run())
    await bus.drain()
    assert got == [1, 2]
    await stop_task(second)


async def test_running_the_same_bus_twice_at_once_is_refused() -> None:
    bus = EventBus()
    first = asyncio.create_task(bus.run())
    await asyncio.sleep(0)
    with pytest.raises(RuntimeError, match="already running"):
        await bus.run()
    assert not first.done()
    await stop_task(first)
