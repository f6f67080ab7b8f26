"""``GET /api/decisions/stream``: each decision, live, as server-sent events.

The decision routine hands every journaled line to ``DecisionStream.publish`` (an observer: it
never blocks the decision path); each subscriber has a bounded queue, and a client too slow to keep
up loses its oldest lines, counted and told in the next event (``dropped``), never stalling
anyone. A comment line every ``keepalive_secs`` (real time) keeps proxies from closing the stream.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncGenerator, Mapping
from typing import Any

import orjson
from fastapi import Depends, FastAPI, HTTPException, status
from fastapi.responses import StreamingResponse

from api.auth import BearerAuth

KEEPALIVE_SECS = 15.0
#: streams open at once: each is a connection (the API process's relay and its client's, too)
#: held for hours, and nothing else bounded them short of the process's open files, which the
#: daemon needs for its journals. More get 503 with Retry-After
MAX_SUBSCRIBERS = 200
RETRY_AFTER_SECS = 30


class _Subscriber:
    def __init__(self, size: int) -> None:
        self.queue: asyncio.Queue[Mapping[str, Any]] = asyncio.Queue(size)
        self.dropped = 0


class DecisionStream:
    def __init__(self, queue_size: int = 256, max_subscribers: int = MAX_SUBSCRIBERS) -> None:
        self._size = queue_size
        self.max_subscribers = max_subscribers
        self._subscribers: set[_Subscriber] = set()
        self.published = 0

    @property
    def subscribers(self) -> int:
        return len(self._subscribers)

    def publish(self, line: Mapping[str, Any], _elapsed_secs: float = 0.0) -> None:
        """A routine observer: hand the line to every subscriber without waiting."""
        self.published += 1
        for sub in self._subscribers:
            if sub.queue.full():
                sub.queue.get_nowait()  # the oldest goes; the client is told how many
                sub.dropped += 1
            sub.queue.put_nowait(line)

    def open(self, keepalive_secs: float = KEEPALIVE_SECS) -> AsyncGenerator[bytes, None] | None:
        """A subscriber's events, its place among the ``max_subscribers`` taken now (None: they
        are all taken). Taken when the request is admitted, not when its answer starts: checked
        then and taken later, a burst of 1,000 requests opened 389 streams past the 200. The
        place is given back when the events end, or when they are dropped unread."""
        if len(self._subscribers) >= self.max_subscribers:
            return None
        return self.events(keepalive_secs)

    def events(self, keepalive_secs: float = KEEPALIVE_SECS) -> AsyncGenerator[bytes, None]:
        """``open`` without the bound."""
        sub = _Subscriber(self._size)
        self._subscribers.add(sub)
        events = self._events(sub, keepalive_secs)
        weakref.finalize(events, self._subscribers.discard, sub)  # an answer never started
        return events

    async def _events(self, sub: _Subscriber, keepalive_secs: float) -> AsyncGenerator[bytes, None]:
        try:
            yield b": subscribed\n\n"  # the client knows it is subscribed from here on
            while True:
                try:
                    line = await asyncio.wait_for(sub.queue.get(), keepalive_secs)
                except TimeoutError:
                    yield b": keepalive\n\n"
                    continue
                yield _event(line, sub)
        finally:
            self._subscribers.discard(sub)


def _event(line: Mapping[str, Any], sub: _Subscriber) -> bytes:
    body: Mapping[str, Any] = line
    if sub.dropped:
        body = {**line, "dropped_before": sub.dropped}
        sub.dropped = 0
    data = orjson.dumps(body, option=orjson.OPT_SORT_KEYS)
    kind = str(line.get("type", "decision"))
    return (
        b"event: "
        + kind.encode()
        + b"\nid: "
        + str(line.get("decision_id", "")).encode()
        + (b"\ndata: " + data + b"\n\n")
    )


def stream_routes(stream: DecisionStream | None) -> Any:
    """The extension adding the stream route (503 without a running daemon)."""

    def extend(app: FastAPI, _ctx: Any, auth: BearerAuth) -> None:
        @app.get(
            "/api/decisions/stream",
            dependencies=[Depends(auth)],
            tags=["journal"],
            response_class=StreamingResponse,
            responses={200: {"content": {"text/event-stream": {}}}},
        )
        async def decisions_stream() -> StreamingResponse:
            """Server-sent events: ``event: decision``, ``data:`` the journal line, live."""
            if stream is None:
                raise HTTPException(
                    status.HTTP_503_SERVICE_UNAVAILABLE,
                    "no daemon is running on this state dir: nothing decides, nothing streams",
                )
            events = stream.open()
            if events is None:
                raise HTTPException(
                    status.HTTP_503_SERVICE_UNAVAILABLE,
                    f"{stream.subscribers} decision streams are open, the most served at once: "
                    f"retry after {RETRY_AFTER_SECS} s",
                    headers={"Retry-After": str(RETRY_AFTER_SECS)},
                )
            return StreamingResponse(
                events,
                media_type="text/event-stream",
                headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
            )

    return extend


__all__ = ["KEEPALIVE_SECS", "MAX_SUBSCRIBERS", "DecisionStream", "stream_routes"]
