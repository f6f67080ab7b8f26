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
