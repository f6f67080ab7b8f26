"""The decision stream never blocks the decision path: a slow subscriber loses its oldest lines,
counted and told in its next event."""

from __future__ import annotations

import json

from api.stream import DecisionStream


async def test_a_slow_subscriber_loses_the_oldest_and_is_told() -> None:
    stream = DecisionStream(queue_size=2)
    events = stream.events(keepalive_secs=60)
    assert await anext(events) == b": subscribed\n\n"
    for n in range(5):
        stream.publish({"type": "decision", "decision_id": f"d{n}", "at_ms": n})
    first = (await anext(events)).decode()
    second = (await anext(events)).decode()
    assert first.startswith("event: decision\nid: d3\n")
    body = json.loads(first.split("data: ", 1)[1])
    assert body["dropped_before"] == 3 and body["decision_id"] == "d3"
    assert "dropped_before" not in json.loads(second.split("data: ", 1)[1])
    await events.aclose()
    assert stream.subscribers == 0


async def test_nobody_listening_costs_nothing() -> None:
    stream = DecisionStream()
    stream.publish({"type": "decision", "decision_id": "d1"})
    assert stream.published == 1 and stream.subscribers == 0


async def test_places_are_taken_when_admitted_and_given_back_even_when_never_read() -> None:
    """The bound was checked when a request came and the place taken when its answer started,
    so a burst of requests all passed the check: 389 streams opened past the 200."""
    stream = DecisionStream(max_subscribers=3)
    admitted = [stream.open(keepalive_secs=60) for _ in range(5)]
    assert [events is not None for events in admitted] == [True, True, True, False, False]
    assert stream.subscribers == 3
    first = admitted[0]
    assert first is not None and await anext(first) == b": subscribed\n\n"
    await first.aclose()  # a client that listened, then left
    assert stream.subscribers == 2
    admitted.clear()  # answers never started (their clients left first): dropped unread
    del first
    assert stream.subscribers == 0
