"""One client connection of the simulator's websocket server and the requests it may send.

Apart from ``sim.ws_server`` (the sending on simulated time) because this is the Binance request
protocol: the stream list of a URL or a request, and the SUBSCRIBE / UNSUBSCRIBE /
LIST_SUBSCRIPTIONS answers that change a connection's subscriptions.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Sequence
from typing import Any

import orjson
from websockets.asyncio.server import ServerConnection

from core.clock import Clock
from sim.feed import SimFeed
from sim.ws_streams import StreamSpec, Subscription, UnknownStreamError, parse_stream

#: Binance's limit of streams on one USDⓈ-M connection
MAX_STREAMS_PER_CONNECTION = 200
#: Binance's error code for a malformed/invalid request sent over the socket
INVALID_REQUEST_CODE = 2


class WsSession:
    """One client connection: its subscriptions and where it is in simulated time."""

    def __init__(self, ws: ServerConnection, combined: bool, opened_ms: int) -> None:
        self.ws = ws
        self.combined = combined
        self.opened_ms = opened_ms
        self.subscriptions: list[Subscription] = []
        self.changed = asyncio.Event()
        self.history: dict[str, deque[bytes]] = {}

    def subscribe(self, specs: Sequence[StreamSpec], now_ms: int) -> None:
        known = {sub.spec.name for sub in self.subscriptions}
        for spec in specs:
            if spec.name not in known:
                self.subscriptions.append(Subscription(spec, now_ms))
                known.add(spec.name)
        self.changed.set()

    def unsubscribe(self, names: Sequence[str]) -> None:
        drop = set(names)
        self.subscriptions = [sub for sub in self.subscriptions if sub.spec.name not in drop]

    def answer(self, message: str | bytes, feed: SimFeed, clock: Clock) -> dict[str, Any]:
        """The reply to one client request; SUBSCRIBE and UNSUBSCRIBE change the subscriptions."""
        try:
            request = orjson.loads(message)
            if not isinstance(request, dict):
                raise ValueError("expected a JSON object")
            request_id = request.get("id")
            method = request.get("method")
            params = request.get("params", [])
            if not isinstance(params, list) or not all(isinstance(p, str) for p in params):
                raise ValueError("params must be a list of stream names")
        except ValueError as exc:
            return _error(None, f"Invalid JSON: {exc}")
        try:
            if method == "SUBSCRIBE":
                if len(self.subscriptions) + len(params) > MAX_STREAMS_PER_CONNECTION:
                    raise UnknownStreamError("too many streams")
                self.subscribe(parse_streams(params, feed), clock.now_ms())
                return {"result": None, "id": request_id}
            if method == "UNSUBSCRIBE":
                self.unsubscribe([spec.name for spec in parse_streams(params, feed)])
                return {"result": None, "id": request_id}
            if method == "LIST_SUBSCRIPTIONS":
                return {
                    "result": [sub.spec.name for sub in self.subscriptions],
                    "id": request_id,
                }
        except UnknownStreamError as exc:
            return _error(request_id, f"Invalid request: {exc}")
        return _error(request_id, f"Invalid request: unknown method {method!r}")


def parse_streams(names: Sequence[str], feed: SimFeed) -> list[StreamSpec]:
    """The streams named, or ``UnknownStreamError`` (an unknown one, more than Binance allows)."""
    if len(names) > MAX_STREAMS_PER_CONNECTION:
        raise UnknownStreamError(f"too many streams ({len(names)} > {MAX_STREAMS_PER_CONNECTION})")
    return [parse_stream(name, feed.tickers, feed.update_interval_ms) for name in names]


def _error(request_id: object, message: str) -> dict[str, Any]:
    return {"error": {"code": INVALID_REQUEST_CODE, "msg": message}, "id": request_id}
