"""EventBus: ordering, isolation of failing handlers, bounded queues, drain/stats/run."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.bus import EventBus, Overflow, QueuedSubscriber
from core.events import Event

MAX_TURNS = 10_000


class Ping(Event):
    topic: ClassVar[str] = "test.ping"
    n: int
    key: str = ""


class Pong(Event):
    topic: ClassVar[str] = "test.pong"
    n: int


def _n(event: Event) -> int:
    assert isinstance(event, Ping | Pong)
    return event.n


def _by_key(event: Event) -> str:
    assert isinstance(event, Ping)
    return event.key


async def _until(predicate: Callable[[], bool], what: str) -> None:
    """Give the event loop turns until ``predicate`` holds (a condition, never a fixed sleep)."""
    for _ in range(MAX_TURNS):
        if predicate():
            return
        await asyncio.sleep(0)
    raise AssertionError(f"never happened: {what}")


async def _stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


# ---------------------------------------------------------------------------------------------
# ordering


def test_inline_handlers_run_in_subscription_order_and_events_in_publish_order() -> None:
    bus = EventBus()
    calls: list[tuple[str, int]] = []

    def recorder(name: str) -> Callable[[Event], None]:
        return lambda e: calls.append((name, _n(e)))

    for name in ("first", "second", "third"):
        bus.subscribe(Ping.topic, recorder(name), name=name)
    for n in range(3):
        bus.publish(Ping(n=n))
    assert calls == [(name, n) for n in range(3) for name in ("first", "second", "third")]
    assert bus.published[Ping.topic] == 3


def test_nested_publish_is_delivered_after_the_current_event_to_every_handler() -> None:
    bus = EventBus()
    calls: list[str] = []

    def first(event: Event) -> None:
        assert isinstance(event, Ping)
        calls.append(f"first:ping{event.n}")
        bus.publish(Pong(n=event.n))
        if event.n == 1:
            bus.publish(Ping(n=2))

    bus.subscribe(Ping.topic, first)
    bus.subscribe(Ping.topic, lambda e: calls.append(f"second:ping{_n(e)}"))
    bus.subscribe(Pong.topic, lambda e: calls.append(f"pong:{_n(e)}"))
    bus.publish(Ping(n=1))
    # "second" sees ping1 before anyone sees what "first" published while handling it
    assert calls == [
        "first:ping1",
        "second:ping1",
        "pong:1",
        "first:ping2",
        "second:ping2",
        "pong:2",
    ]


def test_a_long_chain_of_nested_publishes_does_not_recurse() -> None:
    bus = EventBus()
    seen: list[int] = []

    def relay(event: Event) -> None:
        assert isinstance(event, Ping)
        seen.append(event.n)
        if event.n < 5_000:
            bus.publish(Ping(n=event.n + 1))

    bus.subscribe(Ping.topic, relay)
    bus.publish(Ping(n=0))  # a recursive dispatcher would hit the recursion limit here
    assert seen == list(range(5_001))


def test_events_without_subscribers_are_counted_and_go_nowhere() -> None:
    bus = EventBus()
    bus.publish(Pong(n=1))
    assert bus.published == {Pong.topic: 1}
    assert bus.stats() == {}


# ---------------------------------------------------------------------------------------------
# isolation


def _failure_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "core.bus" and r.levelno >= logging.ERROR]


def test_a_raising_inline_handler_is_logged_counted_and_does_not_stop_the_others(
    caplog: pytest.LogCaptureFixture,
) -> None:
    bus = EventBus()
    got: list[int] = []

    def broken(event: Event) -> None:
        raise RuntimeError("handler bug")

    bus.subscribe(Ping.topic, broken, name="broken")
    bus.subscribe(Ping.topic, lambda e: got.append(_n(e)), name="healthy")
    with caplog.at_level(logging.ERROR, logger="core.bus"):
        bus.publish(Ping(n=1))
        bus.publish(Ping(n=2))
    assert got == [1, 2]
    records = _failure_records(caplog)
    assert len(records) == 2
    assert "broken" in records[0].getMessage()
    assert Ping.topic in records[0].getMessage()
    assert records[0].exc_info is not None  # the traceback is in the log
    assert isinstance(records[0].exc_info[1], RuntimeError)
    assert "handler bug" in caplog.text
    stats = bus.stats()
    assert stats[f"{Ping.topic}:broken"] == {
        "delivered": 0,
        "failed": 2,
        "dropped": 0,
        "coalesced": 0,
    }
    assert stats[f"{Ping.topic}:healthy"]["delivered"] == 2


def test_a_raising_handler_during_a_nested_publish_keeps_the_bus_usable(
    caplog: pytest.LogCaptureFixture,
) -> None:
    bus = EventBus()
    got: list[str] = []

    def fails_on_pong(event: Event) -> None:
        raise ValueError("nope")

    bus.subscribe(Ping.topic, lambda e: bus.publish(Pong(n=_n(e))))
    bus.subscribe(Pong.topic, fails_on_pong)
    bus.subscribe(Pong.topic, lambda e: got.append(f"pong{_n(e)}"))
    with caplog.at_level(logging.ERROR, logger="core.bus"):
        bus.publish(Ping(n=1))
        bus.publish(Ping(n=2))
    assert got == ["pong1", "pong2"]
    assert len(_failure_records(caplog)) == 2


async def test_a_raising_queued_handler_is_logged_counted_and_its_consumer_keeps_going(
    caplog: pytest.LogCaptureFixture,
) -> None:
    bus = EventBus()
    flaky_got: list[int] = []
    steady_got: list[int] = []

    async def flaky(event: Event) -> None:
        assert isinstance(event, Ping)
        if event.n == 1:
            raise RuntimeError("queued handler bug")
        flaky_got.append(event.n)

    async def steady(event: Event) -> None:
        assert isinstance(event, Ping)
        steady_got.append(event.n)

    bus.subscribe_queued(Ping.topic, flaky, name="flaky")
    bus.subscribe_queued(Ping.topic, steady, name="steady")
    runner = asyncio.create_task(bus.run())
    with caplog.at_level(logging.ERROR, logger="core.bus"):
        for n in range(4):
            bus.publish(Ping(n=n))
        await bus.drain()
    assert flaky_got == [0, 2, 3]
    assert steady_got == [0, 1, 2, 3]
    records = _failure_records(caplog)
    assert len(records) == 1
    assert "flaky" in records[0].getMessage()
    assert records[0].exc_info is not None
    assert "queued handler bug" in caplog.text
    stats = bus.stats()
    assert stats[f"{Ping.topic}:flaky"] == {
        "delivered": 3,
        "failed": 1,
        "dropped": 0,
        "coalesced": 0,
        "queued": 0,
    }
    assert stats[f"{Ping.topic}:steady"]["delivered"] == 4
    await _stop(runner)


async def test_a_raising_coalescing_key_function_is_isolated_like_a_handler(
    caplog: pytest.LogCaptureFixture,
) -> None:
    bus = EventBus()
    inline_got: list[int] = []

    def bad_key(event: Event) -> str:
        raise KeyError("no key")

    async def never(event: Event) -> None:
        raise AssertionError("an event without a key must not be delivered")

    bus.subscribe_queued(Ping.topic, never, name="keyed", overflow=Overflow.COALESCE, key=bad_key)
    bus.subscribe(Ping.topic, lambda e: inline_got.append(_n(e)))
    with caplog.at_level(logging.ERROR, logger="core.bus"):
        bus.publish(Ping(n=1))
        bus.publish(Ping(n=2))
    assert inline_got == [1, 2]
    assert bus.stats()[f"{Ping.topic}:keyed"]["failed"] == 2
    assert len(_failure_records(caplog)) == 2


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
    await _stop(runner)


async def test_coalesce_replaces_a_pending_event_of_the_same_key_in_place() -> None:
    bus = EventBus()
    got: list[tuple[str, int]] = []

    async def handler(event: Event) -> None:
        assert isinstance(event, Ping)
        got.append((event.key, event.n))

    sub = bus.subscribe_queued(
        Ping.topic, handler, maxsize=10, overflow=Overflow.COALESCE, key=_by_key
    )
    for n, key in enumerate(["BTC", "ETH", "BTC", "SOL", "BTC"]):
        bus.publish(Ping(n=n, key=key))
    assert len(sub) == 3
    assert sub.stats.coalesced == 2
    runner = asyncio.create_task(bus.run())
    await bus.drain()
    # BTC kept its place in line (first) but carries its newest value
    assert got == [("BTC", 4), ("ETH", 1), ("SOL", 3)]
    await _stop(runner)


async def test_coalesce_with_a_full_queue_and_a_new_key_drops_the_oldest_key() -> None:
    bus = EventBus()
    got: list[tuple[str, int]] = []

    async def handler(event: Event) -> None:
        assert isinstance(event, Ping)
        got.append((event.key, event.n))

    sub = bus.subscribe_queued(
        Ping.topic, handler, maxsize=2, overflow=Overflow.COALESCE, key=_by_key
    )
    for n, key in enumerate(["a", "b", "c", "b"]):
        bus.publish(Ping(n=n, key=key))
    assert (sub.stats.dropped, sub.stats.coalesced, len(sub)) == (1, 1, 2)
    runner = asyncio.create_task(bus.run())
    await bus.drain()
    assert got == [("b", 3), ("c", 2)]
    await _stop(runner)


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
    await _stop(runner)


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
        Ping.topic, consumer.handle, maxsize=maxsize, overflow=overflow, key=_by_key
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
            await _until(settled, "the consumer settles")
        check_accounting(published)

    # let everything through, then the books must balance exactly
    while not (len(sub) == 0 and not consumer.blocked):
        consumer.tokens.put_nowait(None)
        await _until(settled, "the consumer settles")
    await bus.drain()
    s = sub.stats
    assert s.delivered + s.dropped + s.coalesced + len(sub) == published
    assert s.failed == 0
    ns = [_n(e) for e in consumer.delivered]
    if overflow is Overflow.DROP_OLDEST:
        assert ns == sorted(ns)  # what survives is delivered in publish order
        assert s.coalesced == 0
    else:
        for key in "abcd":  # per key, values only move forward
            of_key = [_n(e) for e in consumer.delivered if e.key == key]
            assert of_key == sorted(of_key)
    await _stop(runner)


@settings(max_examples=120, deadline=None)
@given(
    ops=_ops,
    overflow=st.sampled_from([Overflow.DROP_OLDEST, Overflow.COALESCE]),
    maxsize=st.integers(min_value=1, max_value=5),
)
def test_queues_stay_bounded_and_every_published_event_is_accounted_for(
    ops: list[tuple[str, object]], overflow: Overflow, maxsize: int
) -> None:
    asyncio.run(_property_scenario(ops, overflow, maxsize))


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
    await _until(lambda: len(sub) == 0, "the consumer takes the event")
    for _ in range(20):
        await asyncio.sleep(0)
    assert not drained.done()  # the event is in the handler's hands, not handled yet
    release.set()
    await drained
    assert finished == [7]
    await _stop(runner)


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
    await _stop(runner)


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
    await _stop(runner)
    assert outcome == ["cancelled"]
    assert runner.cancelled()


async def test_run_without_queued_subscribers_parks_until_cancelled() -> None:
    bus = EventBus()
    runner = asyncio.create_task(bus.run())
    for _ in range(20):
        await asyncio.sleep(0)
    assert not runner.done()
    await _stop(runner)


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
    await _stop(runner)


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
    await _stop(first)
    bus.publish(Ping(n=2))  # queued while nobody consumes
    second = asyncio.create_task(bus.run())
    await bus.drain()
    assert got == [1, 2]
    await _stop(second)


async def test_running_the_same_bus_twice_at_once_is_refused() -> None:
    bus = EventBus()
    first = asyncio.create_task(bus.run())
    await asyncio.sleep(0)
    with pytest.raises(RuntimeError, match="already running"):
        await bus.run()
    assert not first.done()
    await _stop(first)
