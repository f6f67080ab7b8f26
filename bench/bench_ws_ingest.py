"""Websocket ingest on loopback: how many kline frames per second the client side takes in.

A blaster in a separate process (so it does not share the client's core) accepts a websocket
handshake and writes pre-encoded kline frames as fast as TCP takes them. Measured on the client:

1. raw transport: a bare ``websockets`` client, ``recv(decode=False)`` in a loop, no parsing;
2. the real ``MarketListener`` (orjson parse, ordering checks, ``bus.publish``) to a counter;
3. the same listener feeding the aggregator and the feature tracker (the daemon's tick path).

Rates are taken from the first to the last frame received (connection set-up excluded).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import multiprocessing
import struct
import time
from multiprocessing.connection import Connection

import orjson
from websockets.asyncio.client import connect

from core.bus import EventBus
from core.clock import WallClock
from core.events import Event, Timeframe, Topic
from market.aggregator import MultiTFAggregator
from market.features import FeatureTracker
from market.guard import FrameGuardConfig
from market.listener import MarketListener
from market.timeframes import TIMEFRAME_MS, to_binance_symbol

TICKERS = ("BTC/USDT", "ETH/USDT", "SOL/USDT")
TIMEFRAMES: tuple[Timeframe, ...] = ("15m", "1h", "4h")
START_MS = 1_740_787_200_000
FRAMES = 400_000
_WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def make_frames(count: int) -> list[bytes]:
    """Valid, in-order kline frames round-robin over every stream (one ms apart)."""
    frames = []
    streams = [(to_binance_symbol(t), tf) for t in TICKERS for tf in TIMEFRAMES]
    for i in range(count):
        symbol, tf = streams[i % len(streams)]
        event_ms = START_MS + i
        step = TIMEFRAME_MS[tf]
        open_ms = event_ms - event_ms % step
        price = 100.0 + (i % 1000) / 100
        kline = {
            "t": open_ms,
            "T": open_ms + step - 1,
            "s": symbol,
            "i": tf,
            "f": 0,
            "L": 0,
            "o": "100.00",
            "c": f"{price:.2f}",
            "h": "120.00",
            "l": "90.00",
            "v": f"{i / 1000:.3f}",
            "n": 0,
            "x": False,
            "q": "0",
            "V": "0",
            "Q": "0",
            "B": "0",
        }
        payload = {"e": "kline", "E": event_ms, "s": symbol, "k": kline}
        frames.append(orjson.dumps({"stream": f"{symbol.lower()}@kline_{tf}", "data": payload}))
    return frames


def _ws_frame(payload: bytes) -> bytes:
    """An unmasked server-to-client text frame (RFC 6455)."""
    n = len(payload)
    if n < 126:
        return bytes([0x81, n]) + payload
    if n < 1 << 16:
        return bytes([0x81, 126]) + struct.pack("!H", n) + payload
    return bytes([0x81, 127]) + struct.pack("!Q", n) + payload


async def _blast(frames: list[bytes], ready: Connection) -> None:
    encoded = b"".join(_ws_frame(f) for f in frames)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await reader.readuntil(b"\r\n\r\n")
        key = next(
            line.split(b":", 1)[1].strip()
            for line in request.split(b"\r\n")
            if line.lower().startswith(b"sec-websocket-key:")
        )
        accept = base64.b64encode(hashlib.sha1(key + _WS_GUID.encode()).digest())
        writer.write(
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
            b"Connection: Upgrade\r\nSec-WebSocket-Accept: " + accept + b"\r\n\r\n"
        )
        for start in range(0, len(encoded), 1 << 20):
            writer.write(encoded[start : start + (1 << 20)])
            await writer.drain()
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            await reader.read(1)  # the client's close frame (or EOF)
            writer.write(b"\x88\x00")  # close, no status
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    ready.send(server.sockets[0].getsockname()[1])
    async with server:
        await server.serve_forever()


def _blaster_main(count: int, ready: Connection) -> None:
    asyncio.run(_blast(make_frames(count), ready))


async def _raw_rate(url: str, count: int) -> float:
    async with connect(url, compression=None, max_size=1 << 20, ping_interval=None) as ws:
        await ws.recv(decode=False)
        started = time.perf_counter()
        for _ in range(count - 1):
            await ws.recv(decode=False)
        return (count - 1) / (time.perf_counter() - started)


async def _listener_rate(url: str, count: int, *, full_path: bool) -> float:
    bus = EventBus()
    if full_path:
        aggregator = MultiTFAggregator(bus, observers=[FeatureTracker()])
        bus.subscribe(Topic.MARKET_TICK, aggregator.on_tick, name="aggregator")
    done = asyncio.Event()
    seen = 0
    started = 0.0
    finished = 0.0

    def count_tick(event: Event) -> None:
        nonlocal seen, started, finished
        seen += 1
        if seen == 1:
            started = time.perf_counter()
        elif seen == count:
            finished = time.perf_counter()
            done.set()

    bus.subscribe(Topic.MARKET_TICK, count_tick)
    listener = MarketListener(
        WallClock(),
        bus,
        base_url=url,
        tickers=TICKERS,
        timeframes=TIMEFRAMES,
        path="/stream",
        # the frames are stamped 2025-03-01 on a wall clock: accept their age, keep the checks
        guard=FrameGuardConfig(max_frame_age_secs=100 * 365 * 86_400.0),
    )
    task = asyncio.create_task(listener.run())
    try:
        await asyncio.wait_for(done.wait(), timeout=300)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    stats = listener.stats
    if stats.rejected or stats.reconnects:
        print(f"    (listener dropped {stats.rejected}, reconnects {stats.reconnects})")
    return (count - 1) / (finished - started)


def _with_blaster(count: int, measure: str) -> float:
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    blaster = ctx.Process(target=_blaster_main, args=(count, child), daemon=True)
    blaster.start()
    try:
        port = parent.recv()
        url = f"ws://127.0.0.1:{port}"
        if measure == "raw":
            return asyncio.run(_raw_rate(url, count))
        return asyncio.run(_listener_rate(url, count, full_path=measure == "full"))
    finally:
        blaster.terminate()
        blaster.join()


def main() -> None:
    print(f"websocket ingest on loopback: {FRAMES:,} kline frames, compression off")
    for label, measure in (
        ("raw transport (no parsing)", "raw"),
        ("MarketListener -> bus", "listener"),
        ("listener -> aggregator+features", "full"),
    ):
        rate = _with_blaster(FRAMES, measure)
        print(f"  {label:<32} {rate:>10,.0f} msg/s  {1e6 / rate:6.2f} us/msg")


if __name__ == "__main__":
    main()
