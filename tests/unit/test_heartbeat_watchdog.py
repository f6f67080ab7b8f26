"""Heartbeat file + health check, and the watchdog's forced-decision requests."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from core.bus import EventBus
from core.clock import VirtualClock
from core.events import DecisionRequested, MarketTick, Topic
from runner.heartbeat import Heartbeat, check_health
from runner.watchdog import WATCHDOG_REASON, Watchdog


async def test_heartbeat_touches_the_file_every_interval(tmp_path: Path) -> None:
    clock = VirtualClock(epoch_ms=1_700_000_000_000)
    path = tmp_path / "heartbeat"
    hb = Heartbeat(clock, path, interval_secs=30.0)
    task = asyncio.create_task(hb.run())
    await clock.advance(0)
    assert hb.beats == 1 and path.read_text().split()[0] == "1700000000000"
    await clock.advance(29.0)
    assert hb.beats == 1
    await clock.advance(1.0)
    assert hb.beats == 2
    await clock.advance(90.0)
    assert hb.beats == 5
    assert path.read_text().split()[0] == str(1_700_000_000_000 + 120_000)
    task.cancel()


def test_health_is_fresh_stale_or_missing(tmp_path: Path) -> None:
    path = tmp_path / "heartbeat"
    missing = check_health(path, stale_secs=90, now_wall_secs=1000.0)
    assert not missing.healthy and "no heartbeat" in missing.reason

    path.write_text("x")
    os.utime(path, (1000.0, 1000.0))
    assert check_health(path, stale_secs=90, now_wall_secs=1089.0).healthy
    stale = check_health(path, stale_secs=90, now_wall_secs=1091.0)
    assert not stale.healthy and "stale" in stale.reason and stale.age_secs == 91.0


def _tick(at_ms: int) -> MarketTick:
    return MarketTick(
        ticker="BTC/USDT",
        timeframe="15m",
        open_time_ms=0,
        close_time_ms=899_999,
        open=1.0,
        high=1.0,
        low=1.0,
        close=1.0,
        volume=0.0,
        closed=False,
        event_time_ms=at_ms,
    )


async def test_watchdog_requests_a_decision_after_five_silent_minutes() -> None:
    clock, bus = VirtualClock(), EventBus()
    requests: list[DecisionRequested] = []
    bus.subscribe(Topic.DECISION_REQUESTED, requests.append)  # type: ignore[arg-type]
    dog = Watchdog(clock, bus, silence_secs=300.0, check_secs=15.0)
    task = asyncio.create_task(dog.run())

    await clock.advance(285.0)
    assert requests == []
    await clock.advance(15.0)
    assert len(requests) == 1 and requests[0].reason == WATCHDOG_REASON
    assert "300 s" in requests[0].detail

    await clock.advance(285.0)  # still silent, but asked less than 5 minutes ago
    assert len(requests) == 1
    await clock.advance(15.0)
    assert len(requests) == 2
    task.cancel()


async def test_market_data_rearms_the_watchdog() -> None:
    clock, bus = VirtualClock(), EventBus()
    requests: list[DecisionRequested] = []
    bus.subscribe(Topic.DECISION_REQUESTED, requests.append)  # type: ignore[arg-type]
    dog = Watchdog(clock, bus, silence_secs=300.0, check_secs=15.0)
    bus.subscribe(Topic.MARKET_TICK, dog.on_market_data, name="watchdog")
    task = asyncio.create_task(dog.run())
    for _ in range(40):  # data every 60 s for 40 minutes: never silent long enough
        await clock.advance(60.0)
        bus.publish(_tick(clock.now_ms()))
    assert requests == [] and dog.silence_secs() == 0.0
    await clock.advance(300.0)
    assert len(requests) == 1
    task.cancel()


async def test_silence_counts_from_when_the_watchdog_starts_watching() -> None:
    clock, bus = VirtualClock(), EventBus()
    requests: list[DecisionRequested] = []
    bus.subscribe(Topic.DECISION_REQUESTED, requests.append)  # type: ignore[arg-type]
    dog = Watchdog(clock, bus, silence_secs=300.0, check_secs=15.0)
    await clock.advance(1000.0)  # a long start-up before the loops run
    task = asyncio.create_task(dog.run())
    await clock.advance(285.0)
    assert requests == []
    await clock.advance(15.0)
    assert len(requests) == 1
    task.cancel()
