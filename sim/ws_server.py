"""WsServer: Binance USDⓈ-M market streams on loopback, served from the recording (``SimFeed``).

URL shapes (as on fstream.binance.com): ``/stream?streams=a/b`` and ``/market/stream?streams=a/b``
(combined: each frame is ``{"stream": name, "data": payload}``), ``/ws/<stream>`` and
``/market/ws/<stream>`` (raw: the payload alone). Streams: ``<sym>@kline_<5m|15m|1h|4h>``,
``<sym>@markPrice`` (every 3 s) and ``<sym>@markPrice@1s``. Clients may also send Binance's
``SUBSCRIBE`` / ``UNSUBSCRIBE`` / ``LIST_SUBSCRIPTIONS`` requests (``sim.ws_session``).

Time is the injected ``Clock``. Each connection walks simulated time on the stream's grid (kline
updates every ``update_interval_ms``, mark prices every 1 s / 3 s) and sends, in time order across
its streams, what was due since its last wake. When it has fallen behind the clock it catches up
without sleeping: every candle's closing frame is still sent, but intermediate non-closing kline
updates and mark prices older than the latest one are skipped. See sim/README.md.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from core.clock import Clock
from sim.faults import WsFaults, malformed_frame
from sim.feed import SimFeed
from sim.ws_session import WsSession, parse_streams
from sim.ws_streams import (
    KlineFormat,
    StreamSpec,
    UnknownStreamError,
    due_instants,
    kline_payload,
    mark_price_payload,
    parse_request_path,
)

log = logging.getLogger(__name__)

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})
#: kline frames kept per stream so ``send_out_of_order`` has an older one to re-send
_HISTORY_FRAMES = 4


class WsServerStats(BaseModel):
    model_config = ConfigDict(frozen=True)
    connections_opened: int
    connections_open: int
    frames_sent: int
    pings_sent: int
    pongs_received: int


class WsServer:
    """Binance-compatible market-data websocket server over a ``SimFeed``, on loopback only."""

    def __init__(
        self,
        clock: Clock,
        feed: SimFeed,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        ping_interval_secs: float = 180.0,
        pong_timeout_secs: float | None = None,
        max_connection_secs: float = 24 * 3600.0,
        faults: WsFaults | None = None,
    ) -> None:
        if host not in LOOPBACK_HOSTS:
            raise ValueError(f"the simulator listens on loopback only, not {host!r}")
        if ping_interval_secs <= 0 or max_connection_secs <= 0:
            raise ValueError("ping_interval_secs and max_connection_secs must be > 0")
        self._clock = clock
        self._feed = feed
        self._host = host
        self._requested_port = port
        self._ping_ms = round(ping_interval_secs * 1000)
        self._pong_timeout_ms = (
            None if pong_timeout_secs is None else round(pong_timeout_secs * 1000)
        )
        self._lifetime_ms = round(max_connection_secs * 1000)
        self.faults = faults or WsFaults(clock)
        self.faults.attach(self)
        self._formats = {ticker: KlineFormat.of(feed, ticker) for ticker in feed.tickers}
        self._server: Server | None = None
        self._sessions: set[WsSession] = set()
        self._shutdown_tasks: set[asyncio.Task[None]] = set()
        self._connections_opened = 0
        self._frames_sent = 0
        self._pings_sent = 0
        self._pongs_received = 0

    # --- lifecycle ---

    async def start(self) -> None:
        if self._server is not None:
            raise RuntimeError("WsServer already started")
        self._server = await serve(
            self._handle,
            self._host,
            self._requested_port,
            compression=None,
            ping_interval=None,  # pings run on simulated time, see _keep_alive
            process_request=self._process_request,
            max_queue=64,
            write_limit=2**20,
        )
        log.info("sim websocket server listening on %s", self.url)

    async def stop(self) -> None:
        for task in self._shutdown_tasks:
            task.cancel()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> WsServer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("WsServer not started")
        return int(next(iter(self._server.sockets)).getsockname()[1])

    @property
    def url(self) -> str:
        return f"ws://{self._host}:{self.port}"

    @property
    def stats(self) -> WsServerStats:
        return WsServerStats(
            connections_opened=self._connections_opened,
            connections_open=len(self._sessions),
            frames_sent=self._frames_sent,
            pings_sent=self._pings_sent,
            pongs_received=self._pongs_received,
        )

    # --- FaultTarget ---

    def abort_connections(self) -> int:
        sessions = list(self._sessions)
        for session in sessions:
            session.ws.transport.abort()
        return len(sessions)

    def announce_shutdown(self, grace_secs: float) -> int:
        sessions = list(self._sessions)
        for session in sessions:
            task = asyncio.create_task(self._shut_down(session, grace_secs))
            self._shutdown_tasks.add(task)
            task.add_done_callback(self._shutdown_tasks.discard)
        return len(sessions)

    # --- connection handling ---

    def _process_request(self, connection: ServerConnection, request: Request) -> Response | None:
        if parse_request_path(request.path) is None:
            return connection.respond(404, f"unknown path {request.path!r}\n")
        if self.faults.take_reject():
            log.warning("fault: refused a websocket handshake with HTTP 503")
            return connection.respond(503, "Service Unavailable (simulated)\n")
        return None

    async def _handle(self, ws: ServerConnection) -> None:
        parsed = parse_request_path(ws.request.path if ws.request else "")
        if parsed is None:  # unreachable: _process_request answered 404 already
            return
        combined, names = parsed
        try:
            specs = parse_streams(names, self._feed)
        except UnknownStreamError as exc:
            # Binance refuses a bad stream list; we close at once with the reason (policy violation)
            log.info("closing websocket: %s", exc)
            await ws.close(1008, f"Invalid request: {exc}"[:120])
            return
        session = WsSession(ws, combined, self._clock.now_ms())
        session.subscribe(specs, session.opened_ms)
        self._sessions.add(session)
        self._connections_opened += 1
        tasks = [
            asyncio.create_task(self._send_loop(session)),
            asyncio.create_task(self._keep_alive(session)),
        ]
        try:
            await self._read_loop(session)
        finally:
            self._sessions.discard(session)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _read_loop(self, session: WsSession) -> None:
        """Answer the client's SUBSCRIBE / UNSUBSCRIBE / LIST_SUBSCRIPTIONS until it goes away."""
        try:
            async for message in session.ws:
                reply = session.answer(message, self._feed, self._clock)
                await session.ws.send(orjson.dumps(reply), text=True)
        except ConnectionClosed:
            return

    async def _send_loop(self, session: WsSession) -> None:
        """Push every due frame, in time order, until the connection ends."""
        last_ms = session.opened_ms
        try:
            while True:
                if not session.subscriptions:
                    session.changed.clear()
                    await session.changed.wait()
                    continue
                now_ms = self._clock.now_ms()
                stalled_until = self.faults.stalled_until_ms(now_ms)
                if stalled_until is not None:
                    await self._clock.sleep((stalled_until - now_ms) / 1000)
                    last_ms = max(last_ms, stalled_until - 1)  # what fell due meanwhile is lost
                    continue
                await self._send_due(session, last_ms, now_ms)
                last_ms = now_ms
                next_due_ms = min(
                    now_ms - now_ms % sub.spec.period_ms + sub.spec.period_ms
                    for sub in session.subscriptions
                )
                delay_ms = next_due_ms - self._clock.now_ms()
                if delay_ms > 0:
                    await self._clock.sleep(delay_ms / 1000)
        except asyncio.CancelledError:
            raise
        except ConnectionClosed:
            return
        except Exception:
            # A bug here must not leave a silent, half-alive stream: log it and hang up, so the
            # client sees a close (1011) and reconnects like it would after a Binance failure.
            log.exception("sim websocket sender failed; closing the connection")
            await session.ws.close(1011, "internal error")

    async def _send_due(self, session: WsSession, last_ms: int, now_ms: int) -> None:
        for event_ms, index in due_instants(session.subscriptions, last_ms, now_ms):
            spec = session.subscriptions[index].spec
            payload = self._payload(spec, event_ms)
            if payload is None:
                continue  # outside the recording: the stream is silent
            frame = {"stream": spec.name, "data": payload} if session.combined else payload
            await self._send_frame(session, spec, frame)

    def _payload(self, spec: StreamSpec, event_ms: int) -> dict[str, Any] | None:
        fmt = self._formats[spec.ticker]
        if spec.timeframe is not None:
            state = self._feed.kline_state(spec.ticker, spec.timeframe, event_ms)
            return None if state is None else kline_payload(spec, state, event_ms, fmt)
        price = self._feed.last_price(spec.ticker, event_ms)
        funding = self._feed.funding_rate_at(spec.ticker, event_ms)
        if price is None or funding is None:
            return None
        next_funding_ms = self._feed.next_funding_time_ms(event_ms)
        return mark_price_payload(spec, price, funding.rate, next_funding_ms, event_ms, fmt)

    async def _send_frame(
        self, session: WsSession, spec: StreamSpec, frame: dict[str, Any]
    ) -> None:
        malformed = self.faults.take_malformed()
        if malformed is not None:
            await session.ws.send(malformed_frame(malformed, frame), text=True)
        encoded = orjson.dumps(frame)
        await session.ws.send(encoded, text=True)
        self._frames_sent += 1
        if spec.timeframe is None:
            return
        history = session.history.setdefault(spec.name, deque(maxlen=_HISTORY_FRAMES))
        history.append(encoded)
        if len(history) > 1 and self.faults.take_out_of_order():
            await session.ws.send(history[0], text=True)

    async def _keep_alive(self, session: WsSession) -> None:
        """Ping every ``ping_interval`` and cut the connection after its lifetime, in sim time."""
        end_ms = session.opened_ms + self._lifetime_ms
        next_ping_ms = session.opened_ms + self._ping_ms
        pong: asyncio.Future[float] | None = None  # the pending ping's pong
        pong_deadline_ms: int | None = None
        try:
            while True:
                now_ms = self._clock.now_ms()
                if now_ms >= end_ms:
                    log.info("closing a websocket after its %d ms lifetime", self._lifetime_ms)
                    await session.ws.close(1001, "connection lifetime reached (24h on Binance)")
                    return
                if pong is not None and pong.done():
                    pong, pong_deadline_ms = None, None
                if pong_deadline_ms is not None and now_ms >= pong_deadline_ms:
                    log.warning("closing a websocket: no pong within the timeout")
                    await session.ws.close(1008, "pong timeout")
                    return
                if now_ms >= next_ping_ms:
                    pong = asyncio.ensure_future(await session.ws.ping())
                    pong.add_done_callback(self._count_pong)
                    self._pings_sent += 1
                    next_ping_ms = now_ms + self._ping_ms
                    if self._pong_timeout_ms is not None:
                        pong_deadline_ms = now_ms + self._pong_timeout_ms
                wake_ms = min(end_ms, next_ping_ms, pong_deadline_ms or end_ms)
                await self._clock.sleep(max(0, wake_ms - self._clock.now_ms()) / 1000)
        except asyncio.CancelledError:
            raise
        except ConnectionClosed:
            return
        except Exception:
            log.exception("sim websocket keep-alive failed; closing the connection")
            await session.ws.close(1011, "internal error")

    def _count_pong(self, pong: asyncio.Future[float]) -> None:
        if not pong.cancelled() and pong.exception() is None:
            self._pongs_received += 1

    async def _shut_down(self, session: WsSession, grace_secs: float) -> None:
        try:
            event = {"e": "serverShutdown", "E": self._clock.now_ms()}
            await session.ws.send(orjson.dumps(event), text=True)
            if grace_secs > 0:
                await self._clock.sleep(grace_secs)
            await session.ws.close(1001, "server shutdown")
        except ConnectionClosed:
            return


__all__ = ["WsServer", "WsServerStats"]
