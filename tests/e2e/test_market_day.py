"""The market client against the simulator, end to end, through real loopback sockets.

``MarketListener`` streams klines from ``SimExchange`` (websocket) and backfills over REST through
ccxt (``CcxtCandleBackfill``), feeding the aggregator, for a simulated day at 10000x. The closed
15m / 1h / 4h candles the aggregator ends up with must equal the recording resampled
(``market.recorded.resample``): open times, open/high/low/close exactly, volume to 1e-9 relative.
The fault run breaks the feed on purpose (dropped connections, a stall, malformed and out-of-order
frames, a server shutdown) and must still lose no closed candle.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

import pandas as pd
import pytest

from core.bus import EventBus
from core.events import Candle, Event, MarketGap, Timeframe, Topic
from core.scaled_clock import ScaledClock
from market.aggregator import MultiTFAggregator
from market.ccxt_client import make_binanceusdm
from market.features import FeatureTracker
from market.guard import FrameGuardConfig
from market.history import CcxtCandleBackfill
from market.listener import MarketListener
from market.listener_streams import ListenerStats
from market.recorded import load_klines, resample
from market.timeframes import TIMEFRAME_MS
from sim.exchange import SimExchange
from sim.faults import FaultCounts
from sim.feed import SimFeed

pytestmark = pytest.mark.e2e

TICKERS = ("BTC/USDT", "ETH/USDT", "SOL/USDT")
TIMEFRAMES: tuple[Timeframe, ...] = ("15m", "1h", "4h")
DAY_START_MS = 1_740_787_200_000  # 2025-03-01 00:00 UTC
HOUR_MS = 3_600_000
SPEED = 10_000.0
UPDATE_MS = 15_000
#: 30 simulated minutes = 180 ms of wall time at 10000x: a dead feed (the two-hour stall) is noticed
#: quickly, while a busy event loop (simulator and client share it here) is not mistaken for one. At
#: 20000x and 10 minutes (30 ms) a host loaded 2x saw spurious silences of 1,100 simulated seconds
#: in 4 runs of 5, and a bad frame in flight was lost with the connection it closed
SILENCE_SECS = 1800.0
#: the clean run's: 4 simulated hours (0.7 s of wall time) between frames is a dead feed
CLEAN_SILENCE_SECS = 4 * 3600.0
#: of a stall of this process (simulator and client alike: they share the loop) at most 10 ms of
#: wall time counts, 100 simulated seconds, a small part of SILENCE_SECS, as the daemon's simulator
#: clock leaves stalls out (``ScaledClock.absorb_stalls``); counted in full, a 300 ms stall of a
#: loaded machine was 100 simulated minutes of silence, and the fault run failed 2 runs in 4 with
#: spurious silence reconnects (a malformed frame lost with its connection, one "closed" fewer)
STALL_CAP_SECS = 0.01
STALL_TICK_SECS = 0.004


Recorded = dict[tuple[str, Timeframe], pd.DataFrame]


@pytest.fixture(scope="module")
def feed() -> SimFeed:
    return SimFeed(TICKERS, update_interval_ms=UPDATE_MS)


@pytest.fixture(scope="module")
def recorded() -> Recorded:
    out: Recorded = {}
    for ticker in TICKERS:
        bars = load_klines(ticker, "5m").loc[
            DAY_START_MS - 4 * HOUR_MS : DAY_START_MS + 30 * HOUR_MS
        ]
        for tf in TIMEFRAMES:
            out[ticker, tf] = resample(bars, "5m", tf)
    return out


@dataclass
class Run:
    aggregator: MultiTFAggregator
    listener: ListenerStats
    gaps: list[MarketGap]
    faults: FaultCounts


#: injects faults into the simulator on the clock; the listener's counts say what it has received
Faults = Callable[
    [SimExchange, ScaledClock, Callable[[], ListenerStats]], Coroutine[Any, Any, None]
]


async def run_market(
    feed: SimFeed,
    recorded: Recorded,
    end_ms: int,
    faults: Faults | None = None,
    *,
    rotate_after_secs: float = 23.5 * 3600,
    silence_secs: float = SILENCE_SECS,
) -> Run:
    """Stream from DAY_START_MS until every candle opening before ``end_ms`` has closed.

    Started like the daemon starts it: the aggregator is seeded with history up to midnight and
    the listener resumes from there, so its first connection backfills whatever closed before it
    was up (here: however long the first handshake takes on a busy machine).
    """
    clock = ScaledClock(DAY_START_MS - 300_000, SPEED)  # five simulated minutes before midnight
    stalls = asyncio.create_task(clock.absorb_stalls(STALL_CAP_SECS, STALL_TICK_SECS))
    try:
        return await _run_market(
            clock, feed, recorded, end_ms, faults, rotate_after_secs, silence_secs
        )
    finally:
        stalls.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await stalls


async def _run_market(
    clock: ScaledClock,
    feed: SimFeed,
    recorded: Recorded,
    end_ms: int,
    faults: Faults | None,
    rotate_after_secs: float,
    silence_secs: float,
) -> Run:
    bus = EventBus()
    aggregator = MultiTFAggregator(bus, observers=[FeatureTracker()])
    bus.subscribe(Topic.MARKET_TICK, aggregator.on_tick, name="aggregator")
    for (ticker, tf), frame in recorded.items():
        aggregator.seed(ticker, tf, _candles(frame.loc[: DAY_START_MS - TIMEFRAME_MS[tf]]))
    gaps: list[MarketGap] = []

    def on_gap(event: Event) -> None:
        assert isinstance(event, MarketGap)
        gaps.append(event)

    bus.subscribe(Topic.MARKET_GAP, on_gap)
    async with SimExchange(clock, TICKERS, feed=feed, update_interval_ms=UPDATE_MS) as sim:
        exchange = make_binanceusdm(sim.rest_url, enable_rate_limit=False)
        listener = MarketListener(
            clock,
            bus,
            base_url=sim.ws_base_url,
            tickers=TICKERS,
            timeframes=TIMEFRAMES,
            backfill=CcxtCandleBackfill(exchange, clock=clock),
            silence_timeout_secs=silence_secs,
            rotate_after_secs=rotate_after_secs,
            # closes carry their last update's time; at 20,000x a second of machine stall is
            # 5.6 simulated hours, so frame age is bounded by the day, not the 6 h default
            guard=FrameGuardConfig(close_tolerance_ms=UPDATE_MS, max_frame_age_secs=86_400.0),
        )
        for ticker in TICKERS:
            for tf in TIMEFRAMES:
                last = aggregator.last_closed(ticker, tf)
                assert last is not None
                listener.resume_from(ticker, tf, last.open_time_ms)
        tasks: list[asyncio.Task[Any]] = [asyncio.create_task(listener.run())]
        if faults is not None:
            tasks.append(asyncio.create_task(faults(sim, clock, lambda: listener.stats)))
        try:
            wall_budget_secs = (end_ms - DAY_START_MS) / 1000 / SPEED * 4 + 30
            await _wait_until(lambda: _all_closed(aggregator, end_ms), wall_budget_secs)
            if len(tasks) > 1:
                await tasks[1]  # every fault was injected (and any error in it surfaces here)
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            await exchange.close()
        return Run(aggregator, listener.stats, gaps, sim.ws_faults.counts)


def _candles(frame: pd.DataFrame) -> list[Candle]:
    return [
        Candle(open_time_ms=int(t), open=o, high=h, low=lo, close=c, volume=v)
        for t, (o, h, lo, c, v) in zip(frame.index.tolist(), frame.to_numpy().tolist(), strict=True)
    ]


def _all_closed(aggregator: MultiTFAggregator, end_ms: int) -> bool:
    for ticker in TICKERS:
        for tf in TIMEFRAMES:
            last = aggregator.last_closed(ticker, tf)
            if last is None or last.open_time_ms < end_ms - TIMEFRAME_MS[tf]:
                return False
    return True


def _bad_frames(rejected: dict[str, int]) -> int:
    kinds = ("malformed", "non_finite", "non_positive_price", "out_of_order")
    return sum(rejected.get(kind, 0) for kind in kinds)


async def _wait_until(
    condition: Callable[[], bool], timeout_secs: float, what: str = "the simulated day's end"
) -> None:
    deadline = time.monotonic() + timeout_secs  # only a guard against a hang
    while not condition():
        assert time.monotonic() < deadline, f"waited {timeout_secs} s for {what}"
        await asyncio.sleep(0.005)


def assert_candles_match(run: Run, recorded: Recorded, end_ms: int) -> None:
    for ticker in TICKERS:
        for tf in TIMEFRAMES:
            expected = recorded[ticker, tf].loc[DAY_START_MS : end_ms - TIMEFRAME_MS[tf]]
            got = [
                c
                for c in run.aggregator.closed(ticker, tf)
                if DAY_START_MS <= c.open_time_ms < end_ms
            ]
            assert [c.open_time_ms for c in got] == expected.index.tolist(), (ticker, tf)
            rows = expected[["open", "high", "low", "close", "volume"]].to_numpy().tolist()
            for candle, (o, h, lo, c, v) in zip(got, rows, strict=True):
                where = (ticker, tf, candle.open_time_ms)
                assert (candle.open, candle.high, candle.low, candle.close) == (o, h, lo, c), where
                assert math.isclose(candle.volume, v, rel_tol=1e-9), where


async def test_one_simulated_day_matches_the_recording(feed: SimFeed, recorded: Recorded) -> None:
    end_ms = DAY_START_MS + 24 * HOUR_MS
    # rotation at 12 h, so it surely happens within the day however late the first connect is;
    # the silence timeout is the feed's, not the fault run's tiny one: SILENCE_SECS is 30 ms of
    # wall time, and a loaded machine stalls the loop longer than that, so spurious "silence"
    # reconnects would restart the rotation timer (nothing is lost, but the rotation never comes)
    run = await run_market(
        feed, recorded, end_ms, rotate_after_secs=12 * 3600, silence_secs=CLEAN_SILENCE_SECS
    )
    assert_candles_match(run, recorded, end_ms)
    assert len(run.aggregator.closed("BTC/USDT", "15m")) >= 96
    assert run.gaps == []
    assert run.aggregator.stats.closes_emitted >= 3 * (96 + 24 + 6)
    stats = run.listener
    assert set(stats.rejected) <= {"duplicate"}  # a clean feed: nothing else to drop
    assert stats.reconnects.get("rotate") == 1, stats.reconnects  # and lost nothing doing it


async def test_faults_lose_no_closed_candle_and_bad_frames_are_counted(
    feed: SimFeed, recorded: Recorded
) -> None:
    end_ms = DAY_START_MS + 12 * HOUR_MS

    async def inject(
        sim: SimExchange, clock: ScaledClock, received: Callable[[], ListenerStats]
    ) -> None:
        faults = sim.ws_faults

        async def at(hours: float) -> None:
            await clock.sleep((DAY_START_MS + hours * HOUR_MS - clock.now_ms()) / 1000)
            await _wait_until(lambda: sim.ws.stats.connections_open > 0, 30, "a connection")

        await at(1.0)
        faults.send_malformed(8)  # garbage, truncated, NaN price, negative price, twice each
        faults.send_out_of_order(6)
        # the bad frames go out before the next data frames: the connection is dropped once the
        # listener has them all (a host slower than the clock would otherwise drop them in flight)
        bad_frames_seen = lambda: _bad_frames(received().rejected) == 8 + 6  # noqa: E731
        await _wait_until(bad_frames_seen, 60, "the listener to count the 14 bad frames")
        await at(2.2)
        faults.drop_connections()
        await at(4.1)
        faults.stall(2 * 3600)  # two simulated hours with nothing sent
        await at(7.3)
        faults.server_shutdown()
        await at(9.0)
        faults.drop_connections()

    run = await run_market(feed, recorded, end_ms, inject)
    assert_candles_match(run, recorded, end_ms)  # nothing lost: the backfill filled the outages
    assert run.gaps == []
    injected, stats = run.faults, run.listener
    assert injected.malformed_sent == 8 and injected.out_of_order_sent == 6
    assert injected.connections_dropped >= 2 and injected.stalls == 1
    assert injected.shutdowns_announced >= 1
    rejected = stats.rejected
    assert rejected.get("malformed") == 4  # garbage + truncated, twice
    assert rejected.get("non_finite") == 2 and rejected.get("non_positive_price") == 2
    assert rejected.get("out_of_order", 0) == 6
    assert stats.reconnects.get("closed", 0) >= 2
    assert stats.reconnects.get("silence", 0) >= 1  # the stall was noticed by the watcher
    assert stats.reconnects.get("server_shutdown") == 1
    assert stats.backfilled > 0
