"""Parity: RecordedTicks publishes exactly what the real MarketListener publishes when connected to the
real simulator websocket server on loopback (same feed, same update interval, virtual time).

The listener side runs on a VirtualClock the test advances one update instant at a time, waiting
(on a condition) for the listener to publish that instant's ticks before moving on, so every update
is delivered and none is skipped by the simulator's catch-up rule.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest
from fakes.tasks import stop_tasks
from fakes.virtual_time import drive

from core.bus import EventBus
from core.clock import VirtualClock
from core.events import Event, MarketTick, Timeframe, Topic
from market.guard import FrameGuardConfig
from market.listener import MarketListener
from sim.feed import SimFeed
from sim.recorded_ticks import RecordedTicks
from sim.ws_server import WsServer

U = 15_000  # 20 updates per 5m bar
TICKERS = ("BTC/USDT", "ETH/USDT")  # two, so the order across tickers is compared too
TFS: tuple[Timeframe, ...] = ("15m", "1h", "4h")
MAR_1_2025_MS = 1_740_787_200_000
H = 3_600_000
START_MS = MAR_1_2025_MS + 3 * H  # the two hours hold 15m and 1h closes and the 04:00 4h close
END_MS = START_MS + 2 * H
WAIT_SECS = 20.0  # a hang guard only; conditions end the waits


@pytest.fixture(scope="module")
def feed() -> SimFeed:
    return SimFeed(TICKERS, update_interval_ms=U)


def collect(bus: EventBus) -> list[MarketTick]:
    ticks: list[MarketTick] = []

    def on_tick(event: Event) -> None:
        assert isinstance(event, MarketTick)
        ticks.append(event)

    bus.subscribe(Topic.MARKET_TICK, on_tick, name="test.collect")
    return ticks


async def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_SECS
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.001)


async def wait_for_ticks(ticks: list[MarketTick], count: int, instant_ms: int) -> None:
    await wait_until(lambda: len(ticks) >= count, f"the ticks of {instant_ms}")
    assert len(ticks) == count, f"more ticks than streams at {instant_ms}"


async def listener_ticks(feed: SimFeed) -> list[MarketTick]:
    """Every tick the real listener publishes from the real simulator over START..END."""
    clock = VirtualClock(epoch_ms=START_MS - 1)  # connect just before START: its update is sent
    bus = EventBus()
    ticks = collect(bus)
    async with WsServer(clock, feed) as server:
        listener = MarketListener(
            clock,
            bus,
            base_url=server.url,
            tickers=TICKERS,
            timeframes=TFS,
            guard=FrameGuardConfig(close_tolerance_ms=U),  # closes carry their last update's time
        )
        task = asyncio.create_task(listener.run())
        try:
            await wait_until(lambda: server.stats.connections_open == 1, "the connection")
            await wait_until(lambda: clock.pending_sleepers >= 2, "the sender and the watcher")
            step_secs = 0.001  # to START, then one update interval at a time
            expected = 0
            for instant_ms in range(START_MS, END_MS + 1, U):
                expected += sum(
                    feed.kline_state(ticker, tf, instant_ms) is not None
                    for ticker in TICKERS
                    for tf in TFS
                )
                await clock.advance(step_secs)
                await wait_for_ticks(ticks, expected, instant_ms)
                step_secs = U / 1000
        finally:
            await stop_tasks(task)
        stats = listener.stats
    assert stats.rejected == {} and stats.connects == 1 and stats.missed_closes == 0
    return ticks


async def recorded_ticks(feed: SimFeed) -> tuple[list[MarketTick], RecordedTicks]:
    clock = VirtualClock(epoch_ms=START_MS - 1)
    bus = EventBus()
    ticks = collect(bus)
    source = RecordedTicks(clock, bus, feed, tickers=TICKERS, timeframes=TFS, end_ms=END_MS)
    await drive(clock, source.run())
    return ticks, source


async def test_recorded_ticks_equal_the_listener_on_the_simulator(feed: SimFeed) -> None:
    live = await listener_ticks(feed)
    replayed, source = await recorded_ticks(feed)
    streams = len(TICKERS) * len(TFS)
    assert len(live) == ((END_MS - START_MS) // U + 1) * streams
    assert sum(t.closed for t in live) == (8 + 2 + 1) * len(TICKERS)  # 15m, 1h, the 04:00 4h
    assert len(replayed) == len(live)
    for ours, theirs in zip(replayed, live, strict=True):
        assert ours.model_dump() == theirs.model_dump()  # field by field, floats exact
        assert ours == theirs
    assert source.stats.ticks_published == len(live)
    # the comparison has teeth: the wire's rounding changed many of the feed's raw floats
    rounded = 0
    for tick in live:
        raw = feed.kline_state(tick.ticker, tick.timeframe, tick.event_time_ms)
        assert raw is not None
        rounded += (raw.close, raw.volume) != (tick.close, tick.volume)
    assert rounded > len(live) // 4
    assert source.finished.is_set()
