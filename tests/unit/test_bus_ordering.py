"""EventBus: delivery order and isolation of failing handlers."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import pytest
from bus_support import Ping, Pong, number_of, stop_task

from core.bus import EventBus, Overflow
from core.events import Event

# ---------------------------------------------------------------------------------------------
# ordering


def test_inline_handlers_run_in_subscription_order_and_events_in_publish_order() -> None:
    bus = EventBus()
    calls: list[tuple[str, int]] = []

    def recorder(name: str) -> Callable[[Event], None]:
        return lambda e: calls.append((name, number_of(e)))

    for name in ("first", "second", "third"):
        bus.subscribe(Ping.topic, recorder(name), name=name)
    for n in range(3):
        bus.publish(Ping(n=n))
    assert calls == [(name, n) for n in range(3) for name in ("first", "second", "third")]
    assert bus.published[Ping.topic] == 3


def test_subscribers_are_listed_in_the_order_their_topics_were_first_subscribed() -> None:
    """An inline subscription does not give its topic a place among the queued ones (nor the
    reverse): the stats, and the queued consumers started from the same table, keep the order in
    which each kind was subscribed."""
    bus = EventBus()

    async def queued(_event: Event) -> None:
        return None

    bus.subscribe(Ping.topic, lambda _e: None, name="ping_inline")
    bus.subscribe_queued(Pong.topic, queued, name="pong_queued")
    bus.subscribe_queued(Ping.topic, queued, name="ping_queued")
    assert list(bus.stats()) == [
        f"{Ping.topic}:ping_inline",
        f"{Pong.topic}:pong_queued",
        f"{Ping.topic}:ping_queued",
    ]


class _Stop(BaseException):
    """Not an ``Exception``: the bus lets it through, cutting a delivery short."""


def test_events_left_behind_by_a_delivery_cut_short_go_before_the_next_one() -> None:
    """A handler that raises past the bus (a BaseException) leaves the events published while it
    ran in the backlog: the next publish delivers those first, then its own, in publish order."""
    bus = EventBus()
    seen: list[tuple[str, int]] = []

    def on_ping(event: Event) -> None:
        seen.append(("ping", number_of(event)))
        if number_of(event) == 0:
            bus.publish(Pong(n=10))
            bus.publish(Ping(n=11))
            raise _Stop

    bus.subscribe(Ping.topic, on_ping)
    bus.subscribe(Pong.topic, lambda e: seen.append(("pong", number_of(e))))
    with pytest.raises(_Stop):
        bus.publish(Ping(n=0))
    bus.publish(Ping(n=1))
    assert seen == [("ping", 0), ("pong", 10), ("ping", 11), ("ping", 1)]
    assert bus.published == {Ping.topic: 3, Pong.topic: 1}
    bus.publish(Ping(n=2))  # nothing left behind now: delivered at once
    assert seen[-1] == ("ping", 2)


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
    bus.subscribe(Ping.topic, lambda e: calls.append(f"second:ping{number_of(e)}"))
    bus.subscribe(Pong.topic, lambda e: calls.append(f"pong:{number_of(e)}"))
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
    bus.subscribe(Ping.topic, lambda e: got.append(number_of(e)), name="healthy")
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

    bus.subscribe(Ping.topic, lambda e: bus.publish(Pong(n=number_of(e))))
    bus.subscribe(Pong.topic, fails_on_pong)
    bus.subscribe(Pong.topic, lambda e: got.append(f"pong{number_of(e)}"))
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
    await stop_task(runner)


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
    bus.subscribe(Ping.topic, lambda e: inline_got.append(number_of(e)))
    with caplog.at_level(logging.ERROR, logger="core.bus"):
        bus.publish(Ping(n=1))
        bus.publish(Ping(n=2))
    assert inline_got == [1, 2]
    assert bus.stats()[f"{Ping.topic}:keyed"]["failed"] == 2
    assert len(_failure_records(caplog)) == 2


def test_publish_each_delivers_as_publishing_each_in_turn() -> None:
    """One dispatch for several events: what a handler publishes while one is delivered still
    comes before the next; from inside a handler, the events queue behind the current one."""

    def deliveries(publish_all: Callable[[EventBus, list[Event]], None]) -> list[str]:
        bus = EventBus()
        calls: list[str] = []

        def on_ping(event: Event) -> None:
            calls.append(f"ping {number_of(event)}")
            if number_of(event) == 0:
                bus.publish(Pong(n=10))
                publish_all(bus, [Pong(n=11), Pong(n=12)])

        bus.subscribe(Ping.topic, on_ping)
        bus.subscribe(Pong.topic, lambda e: calls.append(f"pong {number_of(e)}"))
        publish_all(bus, [Ping(n=0), Ping(n=1)])
        assert bus.published == {Ping.topic: 2, Pong.topic: 3}
        return calls

    def one_by_one(bus: EventBus, events: list[Event]) -> None:
        for event in events:
            bus.publish(event)

    expected = ["ping 0", "pong 10", "pong 11", "pong 12", "ping 1"]
    assert deliveries(one_by_one) == expected
    assert deliveries(lambda bus, events: bus.publish_each(events)) == expected
