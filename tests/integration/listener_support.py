"""Helpers shared by the MarketListener tests (test_listener_*.py): a scripted websocket server on
loopback (real sockets), kline frames as Binance sends them, a fake REST backfill, a tick recorder.
No tests here.

Each accepted connection runs the next script of the ``ScriptedServer``; the listener's timers
(silence, backoff, rotation) run on a ``VirtualClock`` the test advances, so every timing assertion
is on virtual time and the tests wait on conditions, never on wall-clock durations.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

import orjson
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from core.bus import EventBus
from core.clock import VirtualClock
from core.events import Candle, Event, MarketTick, Topic
from market.guard import FrameGuardConfig
from market.listener import MarketListener
from market.timeframes import to_binance_symbol

STEP = 900_000
T0 = 1_740_787_200_000  # 2025-03-01 00:00 UTC, a 15m (and 4h) boundary
EPOCH = T0 + 5 * 60_000  # virtual clock start: 5 minutes into a 15m candle

Script = Callable[[ServerConnection], Awaitable[None]]


def kline_frame(
    *,
    ticker: str = "BTC/USDT",
    interval: str = "15m",
    open_ms: int = T0,
    event_ms: int,
    o: str = "100.0",
    h: str = "110.0",
    low: str = "90.0",
    c: str = "105.0",
    v: str = "12.5",
    closed: bool = False,
) -> bytes:
    """A combined-stream kline frame as Binance sends it."""
    symbol = to_binance_symbol(ticker)
    step = {"15m": STEP, "1h": 4 * STEP}[interval]
    kline = {"t": open_ms, "T": open_ms + step - 1, "s": symbol, "i": interval, "o": o, "c": c}
    kline |= {"h": h, "l": low, "v": v, "n": 1, "x": closed, "q": "0", "V": "0", "Q": "0"}
    payload = {"e": "kline", "E": event_ms, "s": symbol, "k": kline}
    return orjson.dumps({"stream": f"{symbol.lower()}@kline_{interval}", "data": payload})


def candle_series(closes: Sequence[float], *, start_ms: int) -> list[Candle]:
    return [
        Candle(open_time_ms=start_ms + i * STEP, open=c, high=c, low=c, close=c, volume=1.0)
        for i, c in enumerate(closes)
    ]


async def wait_until(
    condition: Callable[[], bool], *, timeout_secs: float = 20.0, what: str = "condition"
) -> None:
    """Poll ``condition`` while the event loop runs (the wall-clock bound only catches hangs)."""
    deadline = time.monotonic() + timeout_secs
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.001)


async def hold(ws: ServerConnection) -> None:
    """Keep the connection open and silent (pings are still answered by the library)."""
    await ws.wait_closed()


class ScriptedServer:
    """A websocket server whose n-th connection runs the n-th script, then holds silently."""

    def __init__(self, clock: VirtualClock, *scripts: Script, reject_first: int = 0) -> None:
        self._clock = clock
        self._scripts = list(scripts)
        self._reject_first = reject_first
        self._server: Server | None = None
        self.paths: list[str] = []
        self.attempts_at: list[float] = []  # virtual time of every handshake attempt
        self.opened = 0

    @property
    def url(self) -> str:
        assert self._server is not None
        port = next(iter(self._server.sockets)).getsockname()[1]
        return f"ws://127.0.0.1:{port}"

    async def __aenter__(self) -> ScriptedServer:
        self._server = await serve(
            self._handle, "127.0.0.1", 0, compression=None, process_request=self._process
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    def _process(self, connection: ServerConnection, request: Request) -> Response | None:
        self.attempts_at.append(self._clock.monotonic_secs())
        if self._reject_first > 0:
            self._reject_first -= 1
            return connection.respond(503, "try later\n")
        return None

    async def _handle(self, ws: ServerConnection) -> None:
        assert ws.request is not None
        self.paths.append(ws.request.path)
        index = self.opened
        self.opened += 1
        script = self._scripts[index] if index < len(self._scripts) else hold
        with contextlib.suppress(ConnectionClosed):
            await script(ws)


def send_all(*frames: bytes, then: Script | None = hold) -> Script:
    async def script(ws: ServerConnection) -> None:
        for frame in frames:
            await ws.send(frame, text=True)
        if then is not None:
            await then(ws)

    return script


class FakeBackfill:
    """A CandleBackfill that serves from a list, can fail, and can be held until released."""

    def __init__(
        self, candles: Sequence[Candle] = (), *, failures: int = 0, lagging_calls: int = 0
    ) -> None:
        self.candles = list(candles)
        self.failures = failures
        self.lagging_calls = lagging_calls  # calls answered empty, as if REST lagged the socket
        self.calls: list[tuple[str, str, int, int]] = []
        self.release = asyncio.Event()
        self.release.set()
        self.on_call: Callable[[], None] | None = None

    async def closed_candles(
        self, ticker: str, timeframe: str, since_ms: int, until_ms: int
    ) -> Sequence[Candle]:
        self.calls.append((ticker, timeframe, since_ms, until_ms))
        if self.on_call is not None:
            self.on_call()
        await self.release.wait()
        if self.failures > 0:
            self.failures -= 1
            raise ConnectionError("backfill source down (test)")
        if self.lagging_calls > 0:
            self.lagging_calls -= 1
            return []
        return [
            c
            for c in self.candles
            if since_ms <= c.open_time_ms and c.open_time_ms + STEP - 1 <= until_ms
        ]


class Ticks:
    def __init__(self, bus: EventBus) -> None:
        self.ticks: list[MarketTick] = []
        bus.subscribe(Topic.MARKET_TICK, self._on)

    def _on(self, event: Event) -> None:
        assert isinstance(event, MarketTick)
        self.ticks.append(event)

    def summary(self) -> list[tuple[str, str, int, bool]]:
        return [(t.ticker, t.timeframe, t.open_time_ms, t.closed) for t in self.ticks]


@contextlib.asynccontextmanager
async def running(listener: MarketListener) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(listener.run())
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def make_listener(clock: VirtualClock, bus: EventBus, url: str, **kwargs: object) -> MarketListener:
    options: dict[str, object] = {
        "tickers": ["BTC/USDT"],
        "timeframes": ["15m"],
        "rng": random.Random(7),
        # the scripts stamp frames ahead of the virtual clock (a close at T while the clock is at
        # T - 10 min): a wide skew keeps these tests about ordering; the bound has its own tests
        "guard": FrameGuardConfig(max_clock_skew_secs=7 * 86_400),
    }
    options.update(kwargs)
    return MarketListener(clock, bus, base_url=url, **options)  # type: ignore[arg-type]
