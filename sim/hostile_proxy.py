"""HostileProxy: a man-in-the-middle websocket server on loopback that forwards an upstream's
frames (the simulator's) and slips hostile ones in between.

Each client connection opens its own upstream connection with the same path and query. After
every forwarded kline frame, with probability ``rate``, one hostile frame (``sim.hostile``) made
from that frame is sent; its kind is drawn from ``kinds``. ``counts`` says what was injected, so a
test can match it against what the client counted. Everything runs on the injected clock's
``now_ms`` for the timestamps the hostile frames lie about.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import random
from collections import Counter
from collections.abc import Sequence

import orjson
from websockets.asyncio.client import ClientConnection, connect
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from core.clock import Clock
from sim.hostile import IN_PROCESS_KINDS, HostileKind, hostile_frame

log = logging.getLogger(__name__)

CAPTURED = "captured"  # the kind under which extra (captured) frames are counted


class HostileProxy:
    def __init__(
        self,
        clock: Clock,
        upstream_base_url: str,
        *,
        rate: float = 0.5,
        kinds: Sequence[HostileKind] = IN_PROCESS_KINDS,
        oversized_every: int = 0,
        seed: int = 0,
        extra_frames: Sequence[bytes] = (),
    ) -> None:
        """``oversized_every``: after that many forwarded frames, one oversized frame (each costs
        the client a reconnect, so they are kept rarer than the rest); 0 for none.
        ``extra_frames``: sent in turn in one hostile slot out of ten (e.g. real frames captured
        on another day: old, other intervals and contracts), counted as ``captured``."""
        self._clock = clock
        self._upstream = upstream_base_url.rstrip("/")
        self._rate = rate
        self._kinds = tuple(kinds)
        self._oversized_every = oversized_every
        self._extra = itertools.cycle(extra_frames) if extra_frames else None
        self._rng = random.Random(seed)
        self._server: Server | None = None
        self.counts: Counter[str] = Counter()  # injected hostile frames by kind
        self.forwarded = 0
        self.connections = 0

    @property
    def url(self) -> str:
        assert self._server is not None, "not started"
        port = next(iter(self._server.sockets)).getsockname()[1]
        return f"ws://127.0.0.1:{port}"

    async def start(self) -> str:
        self._server = await serve(self._handle, "127.0.0.1", 0, compression=None, max_size=None)
        return self.url

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    @property
    def injected(self) -> int:
        return sum(self.counts.values())

    async def _handle(self, client: ServerConnection) -> None:
        assert client.request is not None
        self.connections += 1
        url = self._upstream + client.request.path
        try:
            async with connect(url, compression=None, max_size=None) as upstream:
                relay = asyncio.create_task(self._relay(upstream, client))
                closed = asyncio.create_task(client.wait_closed())
                await asyncio.wait({relay, closed}, return_when=asyncio.FIRST_COMPLETED)
                for task in (relay, closed):
                    task.cancel()
                with contextlib.suppress(asyncio.CancelledError, ConnectionClosed):
                    await relay
        except (OSError, ConnectionClosed) as exc:
            log.info("hostile proxy: connection ended: %r", exc)

    async def _relay(self, upstream: ClientConnection, client: ServerConnection) -> None:
        async for raw in upstream:
            await client.send(raw)
            self.forwarded += 1
            oversized = self._oversized_every > 0 and self.forwarded % self._oversized_every == 0
            if not oversized and self._rng.random() >= self._rate:
                continue
            template = _kline_template(raw)
            if template is None:
                continue
            if not oversized and self._extra is not None and self._rng.random() < 0.1:
                self.counts[CAPTURED] += 1
                await client.send(next(self._extra).decode())
                continue
            kind = HostileKind.OVERSIZED if oversized else self._rng.choice(self._kinds)
            frame = hostile_frame(kind, template, self._clock.now_ms(), self._rng)
            self.counts[kind] += 1
            await client.send(frame.decode("utf-8", "replace"))


def _kline_template(raw: str | bytes) -> dict[str, object] | None:
    try:
        frame = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    data = frame.get("data") if type(frame) is dict else None
    if type(data) is not dict or data.get("e") != "kline":
        return None
    return frame  # type: ignore[no-any-return]


__all__ = ["CAPTURED", "HostileProxy"]
