"""MarketListener against a scripted websocket server on loopback (real sockets, virtual time).

Each accepted connection runs the next script of the ``ScriptedServer``; the listener's timers
(silence, backoff, rotation) run on a ``VirtualClock`` the test advances, so every timing assertion
is on virtual time and the tests wait on conditions, never on wall-clock durations.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

import orjson
import pytest
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from core.backoff import backoff_delay_secs
from core.bus import EventBus
from core.clock import VirtualClock
from core.events import Candle, Event, MarketTick, Topic
from market.guard import FrameGuardConfig
from market.listener import MarketListener
from market.listener_streams import Cause
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


async def test_one_connection_for_all_streams_and_ticks_in_order() -> None:
    clock, bus = VirtualClock(EPOCH), EventBus()
    ticks = Ticks(bus)
    frames = [
        kline_frame(ticker="BTC/USDT", interval="15m", event_ms=T0 + 1_000),
        kline_frame(ticker="ETH/USDT", interval="1h", event_ms=T0 + 1_100),
        kline_frame(ticker="BTC/USDT", interval="15m", event_ms=T0 + 2_000, c="106.0"),
        kline_frame(ticker="BTC/USDT", interval="15m", event_ms=T0 + 899_999, closed=True),
    ]
    async with ScriptedServer(clock, send_all(*frames)) as server:
        listener = make_listener(
            clock, bus, server.url, tickers=["BTC/USDT", "ETH/USDT"], timeframes=["15m", "1h"]
        )
        async with running(listener):
            await wait_until(lambda: len(ticks.ticks) == 4, what="4 ticks")
            assert server.paths == [
                "/market/stream?streams=btcusdt@kline_15m/btcusdt@kline_1h/"
                "ethusdt@kline_15m/ethusdt@kline_1h"
            ]
            assert ticks.summary() == [
                ("BTC/USDT", "15m", T0, False),
                ("ETH/USDT", "1h", T0, False),
                ("BTC/USDT", "15m", T0, False),
                ("BTC/USDT", "15m", T0, True),
            ]
            stats = listener.stats
            assert (stats.connects, stats.frames, stats.ticks_published) == (1, 4, 4)
            assert stats.rejected == {} and stats.reconnects == {}
            assert stats.last_frame_at_ms == EPOCH  # virtual time did not move


async def test_bad_frames_are_dropped_counted_and_logged_with_rate_limit(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock, bus = VirtualClock(EPOCH), EventBus()
    ticks = Ticks(bus)
    good = [kline_frame(event_ms=T0 + i * 1_000, c=f"{100 + i}.0") for i in range(1, 4)]
    frames = [
        good[0],
        *[b"garbage {" for _ in range(50)],
        kline_frame(event_ms=T0 + 1_500, c="NaN"),
        kline_frame(event_ms=T0 + 1_500, c="-5"),
        kline_frame(event_ms=T0 + 1_500, v="-1"),
        kline_frame(event_ms=T0 + 1_500, h="80.0"),
        kline_frame(ticker="SOL/USDT", event_ms=T0 + 1_500),  # valid, but not subscribed
        orjson.dumps({"stream": "btcusdt@aggTrade", "data": {"e": "aggTrade", "E": 1}}),
        good[1],
        good[1],  # the same push twice
        good[0],  # event time going backwards
        kline_frame(open_ms=T0 - STEP, event_ms=T0 + 5_000, closed=True),  # an older candle
        good[2],
    ]
    caplog.set_level(logging.WARNING, logger="market.listener")
    async with ScriptedServer(clock, send_all(*frames)) as server:
        listener = make_listener(clock, bus, server.url)
        async with running(listener):
            await wait_until(lambda: listener.stats.frames == len(frames), what="all frames")
    assert [t.close for t in ticks.ticks] == [101.0, 102.0, 103.0]
    stats = listener.stats
    assert stats.rejected == {
        "malformed": 50,
        "non_finite": 1,
        "non_positive_price": 1,
        "negative_volume": 1,
        "inconsistent": 1,
        "unexpected_stream": 1,
        "not_kline": 1,
        "duplicate": 1,
        "out_of_order": 2,
    }
    assert stats.connects == 1 and stats.reconnects == {}
    malformed_lines = [r for r in caplog.records if "(malformed:" in r.getMessage()]
    assert len(malformed_lines) == 1  # 50 bad frames, one line (rate limited)


async def test_silence_reconnects_after_the_timeout_in_clock_time() -> None:
    clock, bus = VirtualClock(EPOCH), EventBus()
    ticks = Ticks(bus)
    first = send_all(kline_frame(event_ms=T0 + 1_000))  # then silent, connection kept open
    second = send_all(kline_frame(event_ms=T0 + 40_000, c="107.0"))
    async with ScriptedServer(clock, first, second) as server:
        listener = make_listener(clock, bus, server.url, silence_timeout_secs=30)
        async with running(listener):
            await wait_until(lambda: len(ticks.ticks) == 1, what="first tick")
            await clock.advance(29.0)
            assert listener.stats.reconnects == {}
            await clock.advance(1.5)
            await wait_until(lambda: listener.stats.reconnects.get("silence") == 1)
            # a stalled peer is dropped, then the backoff sleep (base 1 s, jittered) runs
            await clock.advance(1.0)
            await wait_until(lambda: len(ticks.ticks) == 2, what="tick after reconnect")
            assert server.opened == 2 and listener.stats.connects == 2


async def test_server_shutdown_reconnects_at_once() -> None:
    clock, bus = VirtualClock(EPOCH), EventBus()
    ticks = Ticks(bus)
    first = send_all(
        kline_frame(event_ms=T0 + 1_000),
        orjson.dumps({"e": "serverShutdown", "E": T0 + 1_500}),
    )
    second = send_all(kline_frame(event_ms=T0 + 2_000, c="107.0"))
    async with ScriptedServer(clock, first, second) as server:
        listener = make_listener(clock, bus, server.url)
        async with running(listener):
            await wait_until(lambda: len(ticks.ticks) == 2, what="tick on the new connection")
            assert listener.stats.reconnects == {Cause.SERVER_SHUTDOWN: 1}
            assert clock.monotonic_secs() == 0.0  # no backoff sleep was needed
            assert server.opened == 2


async def test_a_server_that_only_announces_shutdown_is_not_hammered() -> None:
    """Prompt reconnects are for connections that worked; a server announcing shutdown on every
    connect, before any data, gets the ordinary backoff."""
    clock, bus = VirtualClock(EPOCH), EventBus()
    shutdown = send_all(orjson.dumps({"e": "serverShutdown", "E": EPOCH}), then=hold)
    async with ScriptedServer(clock, shutdown, shutdown) as server:
        listener = make_listener(clock, bus, server.url)
        async with running(listener):
            await wait_until(lambda: listener.stats.reconnects.get("server_shutdown") == 1)
            await wait_until(lambda: clock.pending_sleepers == 1)  # backing off, not reconnecting
            assert len(server.attempts_at) == 1
            await clock.step()
            await wait_until(lambda: listener.stats.reconnects.get("server_shutdown") == 2)
    assert server.attempts_at[1] > server.attempts_at[0] == 0.0


async def test_backoff_grows_on_failures_and_resets_after_a_healthy_connection() -> None:
    clock, bus = VirtualClock(EPOCH), EventBus()
    ticks = Ticks(bus)
    closes_after_a_tick = send_all(kline_frame(event_ms=T0 + 1_000), then=None)
    async with ScriptedServer(clock, closes_after_a_tick, reject_first=3) as server:
        listener = make_listener(clock, bus, server.url, rng=random.Random(11))
        expected_rng = random.Random(11)
        async with running(listener):
            for tries in range(1, 5):
                await wait_until(lambda n=tries: len(server.attempts_at) == n)  # type: ignore[misc]
                await wait_until(lambda: clock.pending_sleepers > 0)
                await clock.step()
            await wait_until(lambda: listener.stats.reconnects.get("closed") == 1)
            await wait_until(lambda: clock.pending_sleepers > 0)
            await clock.step()
            await wait_until(lambda: len(server.attempts_at) == 5)
    gaps = [b - a for a, b in zip(server.attempts_at, server.attempts_at[1:], strict=False)]
    # three refusals back off for attempts 0, 1, 2; the 4th attempt connects and delivers a
    # tick, so when that connection closes the backoff starts again from attempt 0
    attempts = [0, 1, 2, 0]
    expected = [backoff_delay_secs(n, 1.0, 60.0, 0.5, expected_rng.random()) for n in attempts]
    assert gaps == pytest.approx(expected)
    assert expected[2] > expected[3]
    assert listener.stats.reconnects == {"connect_failed": 3, "closed": 1}
    assert len(ticks.ticks) == 1


async def test_rotation_waits_for_a_quiet_moment_and_reconnects_at_once() -> None:
    # at 100 s of virtual time the clock reads 30 s before a 15m boundary: rotation waits until
    # 60 s past it, i.e. 90 s more
    epoch = T0 + STEP - 100_000 - 30_000
    clock, bus = VirtualClock(epoch), EventBus()
    async with ScriptedServer(clock, send_all(kline_frame(event_ms=T0 + 1_000))) as server:
        listener = make_listener(
            clock, bus, server.url, rotate_after_secs=100, silence_timeout_secs=10_000
        )
        async with running(listener):
            await wait_until(lambda: listener.stats.ticks_published == 1)
            await clock.advance(150.0)
            assert server.opened == 1
            await clock.advance(40.5)
            await wait_until(lambda: server.opened == 2, what="rotated connection")
            assert listener.stats.reconnects == {Cause.ROTATE: 1}


async def test_backfill_runs_after_connect_and_before_live_ticks() -> None:
    clock, bus = VirtualClock(EPOCH), EventBus()
    ticks = Ticks(bus)
    history = candle_series([101.0, 102.0, 103.0, 104.0], start_ms=T0)  # opens T0 .. T0+3*STEP
    backfill = FakeBackfill(history[1:])
    first = send_all(
        kline_frame(open_ms=T0, event_ms=T0 + 1_000),
        kline_frame(open_ms=T0, event_ms=T0 + STEP - 1, c="101.0", closed=True),
        then=None,  # the server hangs up
    )
    live_open = T0 + 4 * STEP
    sent = asyncio.Event()

    async def mark_sent(ws: ServerConnection) -> None:
        sent.set()
        await hold(ws)

    second = send_all(
        kline_frame(open_ms=T0 + 3 * STEP, event_ms=live_open - 1, c="104.0", closed=True),
        kline_frame(open_ms=live_open, event_ms=live_open + 1_000),
        then=mark_sent,
    )
    async with ScriptedServer(clock, first, second) as server:
        listener = make_listener(clock, bus, server.url, backfill=backfill)
        backfill.on_call = lambda: calls_seen.append(server.opened)
        calls_seen: list[int] = []
        async with running(listener):
            await wait_until(lambda: listener.stats.reconnects.get("closed") == 1)
            backfill.release.clear()  # hold the backfill: the live frames must wait behind it
            # the outage lasts until 1 s into candle 4: candles 1, 2 and 3 closed meanwhile
            await clock.advance((T0 + 4 * STEP + 1_000 - EPOCH) / 1000)
            await wait_until(lambda: len(backfill.calls) == 1, what="backfill call")
            await wait_until(sent.is_set, what="live frames sent during the backfill")
            assert [t.closed for t in ticks.ticks] == [False, True]  # nothing published yet
            backfill.release.set()
            await wait_until(lambda: len(ticks.ticks) == 6, what="backfill then live")
    assert calls_seen == [2]  # the new connection was open when the backfill ran
    assert backfill.calls == [("BTC/USDT", "15m", T0 + STEP, clock.now_ms())]
    assert ticks.summary() == [
        ("BTC/USDT", "15m", T0, False),
        ("BTC/USDT", "15m", T0, True),
        ("BTC/USDT", "15m", T0 + STEP, True),  # backfilled
        ("BTC/USDT", "15m", T0 + 2 * STEP, True),  # backfilled
        ("BTC/USDT", "15m", T0 + 3 * STEP, True),  # backfilled, and then live too: dropped
        ("BTC/USDT", "15m", live_open, False),
    ]
    stats = listener.stats
    assert stats.backfilled == 3 and stats.rejected == {"duplicate": 1}


async def _run_with_failing_backfill(
    failures: int,
) -> tuple[list[MarketTick], FakeBackfill, MarketListener]:
    """Resume 30 min back, connect, and let the backfill fail ``failures`` times."""
    clock, bus = VirtualClock(EPOCH), EventBus()
    ticks = Ticks(bus)
    live = send_all(kline_frame(open_ms=T0, event_ms=EPOCH + 1))
    backfill = FakeBackfill(candle_series([101.0], start_ms=T0 - STEP), failures=failures)
    async with ScriptedServer(clock, live) as server:
        listener = make_listener(
            clock, bus, server.url, backfill=backfill, silence_timeout_secs=10_000
        )
        listener.resume_from("BTC/USDT", "15m", T0 - 2 * STEP)  # known up to 30 min ago
        async with running(listener):
            while len(ticks.ticks) < 2:  # each failed attempt sleeps a backoff on the clock
                calls = len(backfill.calls)
                await wait_until(
                    lambda n=calls: len(backfill.calls) > n or len(ticks.ticks) == 2  # type: ignore[misc]
                )
                if len(ticks.ticks) < 2:
                    await wait_until(lambda: clock.pending_sleepers >= 1)
                    await clock.advance(60.0)  # past any retry delay (capped at 60 s)
    return ticks.ticks, backfill, listener


async def test_backfill_failures_are_retried_before_live_data() -> None:
    ticks, backfill, listener = await _run_with_failing_backfill(failures=2)
    assert [(t.open_time_ms, t.closed) for t in ticks] == [(T0 - STEP, True), (T0, False)]
    assert len(backfill.calls) == 3
    assert listener.stats.backfill_failures == 0 and listener.stats.backfilled == 1


async def test_a_backfill_that_keeps_failing_does_not_block_live_data() -> None:
    """Three failures at connect: give up, stream live; the first live frame shows the close is
    still missing, so it is fetched again (and this time the source answers)."""
    ticks, backfill, listener = await _run_with_failing_backfill(failures=5)
    assert [(t.open_time_ms, t.closed) for t in ticks] == [(T0, False), (T0 - STEP, True)]
    assert len(backfill.calls) == 6
    stats = listener.stats
    assert (stats.backfill_failures, stats.missed_closes, stats.repaired_closes) == (1, 1, 1)
    assert stats.reconnects == {}


async def test_a_lost_close_frame_is_fetched_by_rest() -> None:
    clock, bus = VirtualClock(EPOCH), EventBus()
    ticks = Ticks(bus)
    closed = candle_series([101.0], start_ms=T0)
    backfill = FakeBackfill(closed)
    frames = send_all(
        kline_frame(open_ms=T0, event_ms=T0 + 1_000),
        kline_frame(open_ms=T0 + STEP, event_ms=T0 + STEP + 1_000),  # T0's close never came
    )
    async with ScriptedServer(clock, frames) as server:
        listener = make_listener(clock, bus, server.url, backfill=backfill)
        async with running(listener):
            await clock.advance(STEP * 2 / 1000)
            await wait_until(lambda: len(ticks.ticks) == 3, what="repaired close")
    assert ticks.summary()[2] == ("BTC/USDT", "15m", T0, True)
    stats = listener.stats
    assert (stats.missed_closes, stats.repaired_closes) == (1, 1)
    assert backfill.calls[0][2] == T0


async def test_closes_never_seen_at_all_are_fetched_even_when_rest_lags() -> None:
    """After a stall the stream resumes two candles later: both closes in between are fetched,
    retrying while the REST source does not have them yet."""
    clock, bus = VirtualClock(T0 + 2 * STEP + 5_000), EventBus()
    ticks = Ticks(bus)
    backfill = FakeBackfill(candle_series([101.0, 102.0], start_ms=T0), lagging_calls=2)
    frames = send_all(kline_frame(open_ms=T0 + 2 * STEP, event_ms=T0 + 2 * STEP + 2_000))
    async with ScriptedServer(clock, frames) as server:
        listener = make_listener(clock, bus, server.url, backfill=backfill)
        listener.resume_from("BTC/USDT", "15m", T0 - STEP)  # known up to the candle before T0
        async with running(listener):
            # the connect-time backfill and the first repair call both come back empty
            await wait_until(lambda: len(backfill.calls) == 2, what="first repair call")
            await wait_until(lambda: clock.pending_sleepers == 2)  # repair retry + watcher
            await clock.step()
            await wait_until(lambda: len(ticks.ticks) == 3, what="repaired closes")
    assert ticks.summary() == [
        ("BTC/USDT", "15m", T0 + 2 * STEP, False),
        ("BTC/USDT", "15m", T0, True),
        ("BTC/USDT", "15m", T0 + STEP, True),
    ]
    assert [call[2] for call in backfill.calls] == [T0, T0, T0]
    stats = listener.stats
    assert (stats.missed_closes, stats.repaired_closes, stats.backfilled) == (2, 2, 2)


async def test_a_live_close_waits_for_the_repair_of_an_older_one() -> None:
    """The next candle's close arrives while an older lost close is still being fetched: the
    newer close is held and published after the repair, so every close arrives in order."""
    clock, bus = VirtualClock(EPOCH), EventBus()
    ticks = Ticks(bus)
    backfill = FakeBackfill(candle_series([101.0], start_ms=T0))
    backfill.release.clear()  # the repair's REST call hangs until the live close is in
    frames = send_all(
        kline_frame(open_ms=T0, event_ms=T0 + 1_000),
        kline_frame(open_ms=T0 + STEP, event_ms=T0 + STEP + 1_000),  # T0's close never came
        kline_frame(open_ms=T0 + STEP, event_ms=T0 + 2 * STEP - 1, closed=True),
    )
    async with ScriptedServer(clock, frames) as server:
        listener = make_listener(clock, bus, server.url, backfill=backfill)
        async with running(listener):
            await clock.advance(STEP * 2 / 1000)
            await wait_until(lambda: listener.stats.frames == 3, what="the live close")
            await wait_until(lambda: len(backfill.calls) == 1, what="the repair call")
            assert [t.closed for t in ticks.ticks] == [False, False]  # the close is held
            backfill.release.set()
            await wait_until(lambda: len(ticks.ticks) == 4, what="repair, then the held close")
    assert ticks.summary()[2:] == [
        ("BTC/USDT", "15m", T0, True),
        ("BTC/USDT", "15m", T0 + STEP, True),
    ]
    assert (listener.stats.missed_closes, listener.stats.repaired_closes) == (1, 1)


async def test_a_repair_cut_short_by_a_reconnect_is_finished_by_the_next_backfill() -> None:
    """The connection ends while an older lost close is still being fetched and a newer live close
    is held: the held close must not be published past the gap (the next connection's backfill
    starts after the newest published close, so the lost one would never be fetched)."""
    clock, bus = VirtualClock(EPOCH), EventBus()
    ticks = Ticks(bus)
    backfill = FakeBackfill(candle_series([101.0, 102.0], start_ms=T0))
    backfill.release.clear()  # the repair's REST call hangs until the connection is gone
    frames = send_all(
        kline_frame(open_ms=T0, event_ms=T0 + 1_000),
        kline_frame(open_ms=T0 + STEP, event_ms=T0 + STEP + 1_000),  # T0's close never came
        kline_frame(open_ms=T0 + STEP, event_ms=T0 + 2 * STEP - 1, closed=True),
        then=None,  # and the server hangs up
    )
    async with ScriptedServer(clock, frames) as server:
        listener = make_listener(clock, bus, server.url, backfill=backfill)
        listener.resume_from("BTC/USDT", "15m", T0 - STEP)  # seeded up to the candle before T0
        async with running(listener):
            await wait_until(lambda: listener.stats.reconnects.get("closed") == 1, what="hang-up")
            assert len(backfill.calls) == 1  # the repair, cut short
            await clock.advance(STEP * 2 / 1000)  # both candles have closed by the reconnect
            backfill.release.set()
            await wait_until(lambda: sum(t.closed for t in ticks.ticks) >= 2, what="both closes")
    closes = [(t.open_time_ms, t.closed) for t in ticks.ticks if t.closed]
    assert closes == [(T0, True), (T0 + STEP, True)]
