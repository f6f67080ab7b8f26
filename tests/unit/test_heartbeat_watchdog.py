"""Heartbeat file + health check, and the watchdog's forced-decision requests."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

import pytest
from fakes.disk_full import disk_full_after
from fakes.heartbeat import write_beat

from core.bus import EventBus
from core.clock import VirtualClock
from core.events import DecisionRequested, MarketTick, Topic
from runner.cli import main
from runner.heartbeat import Heartbeat, check_health
from runner.watchdog import WATCHDOG_REASON, Watchdog
from state.heartbeat_age import FUTURE_TOLERANCE_SECS


async def test_heartbeat_touches_the_file_every_interval(tmp_path: Path) -> None:
    clock = VirtualClock(epoch_ms=1_700_000_000_000)
    path = tmp_path / "heartbeat"
    hb = Heartbeat(clock, path, interval_secs=30.0)
    task = asyncio.create_task(hb.run())
    await clock.advance(0)
    assert hb.beats == 1 and json.loads(path.read_text())["at_ms"] == 1_700_000_000_000
    await clock.advance(29.0)
    assert hb.beats == 1
    await clock.advance(1.0)
    assert hb.beats == 2
    await clock.advance(90.0)
    assert hb.beats == 5
    assert json.loads(path.read_text())["at_ms"] == 1_700_000_000_000 + 120_000
    task.cancel()


@pytest.mark.parametrize("atomic", [True, False])
async def test_a_beat_that_cannot_be_written_keeps_the_loop_and_its_status_line_going(
    tmp_path: Path, atomic: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """A full disk (a beat may not grow a file past 10 bytes) fails the beat: logged when it
    starts and when it ends, the loop and its status line go on, and the beats resume by
    themselves. The stale file is what ``vigil health`` reports meanwhile."""
    clock = VirtualClock(epoch_ms=1_700_000_000_000)
    path = tmp_path / "heartbeat"
    reports: list[int] = []
    hb = Heartbeat(clock, path, 30.0, on_beat=lambda: reports.append(1), atomic=atomic)
    task = asyncio.create_task(hb.run())
    with disk_full_after(10):
        await clock.advance(0)
        await clock.advance(90.0)
    assert not task.done() and len(reports) == 4 and hb.beats == 0
    failures = [r for r in caplog.records if "heartbeat" in r.getMessage()]
    assert len(failures) == 1 and "File too large" in failures[0].getMessage()
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []

    await clock.advance(30.0)
    assert hb.beats == 1 and json.loads(path.read_text())["at_ms"] == 1_700_000_120_000
    assert "written again" in caplog.records[-1].getMessage()
    task.cancel()


def test_a_beat_written_in_place_holds_the_same_bytes_as_an_atomic_one(tmp_path: Path) -> None:
    clock = VirtualClock(epoch_ms=1_700_000_000_000)
    facts = {"market": {"BTC/USDT 5m": {"last_frame_ms": 1, "silent_real_secs": 0.0}}}
    atomic = Heartbeat(clock, tmp_path / "atomic", 30.0, facts=lambda: facts)
    in_place = Heartbeat(clock, tmp_path / "in_place", 30.0, facts=lambda: facts, atomic=False)
    for heartbeat in (atomic, in_place):
        heartbeat.beat()
    facts = {}  # a shorter beat after a longer one: the old tail must not stay
    for heartbeat in (atomic, in_place):
        heartbeat.beat()
    assert (tmp_path / "in_place").read_bytes() == (tmp_path / "atomic").read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["atomic", "in_place"]


def test_health_is_fresh_stale_or_missing(tmp_path: Path) -> None:
    path = tmp_path / "heartbeat"
    missing = check_health(path, stale_secs=90, now_wall_secs=1000.0)
    assert not missing.healthy and "no heartbeat" in missing.reason

    write_beat(path)
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


# --- health sees the market, the journal and the trading state -----------------------------


def _beat(tmp_path: Path, clock: VirtualClock, **facts: object) -> Path:
    path = tmp_path / "heartbeat"
    Heartbeat(clock, path, 30.0, facts=lambda: facts).beat()
    return path


def _stream(last_frame_ms: int | None, silent_real_secs: float) -> dict[str, object]:
    return {"last_frame_ms": last_frame_ms, "silent_real_secs": silent_real_secs}


async def test_health_fails_with_no_market_data_at_all(tmp_path: Path) -> None:
    """A network cut: the daemon beats, but no stream ever had a valid frame."""
    real = [1000.0]
    clock, bus = VirtualClock(epoch_ms=1_700_000_000_000), EventBus()
    dog = Watchdog(clock, bus, streams=["BTC/USDT 15m", "ETH/USDT 15m"], real_secs=lambda: real[0])
    hb = Heartbeat(
        clock, tmp_path / "heartbeat", 30.0, facts=lambda: {"market": dog.market_report()}
    )
    real[0] += 400.0  # 400 real seconds of nothing
    hb.beat()
    now = (tmp_path / "heartbeat").stat().st_mtime
    status = check_health(tmp_path / "heartbeat", 90, now, market_stale_secs=300)
    assert not status.healthy
    assert status.reasons == (
        "market: no valid frame on any of 2 streams since the daemon started watching "
        "(limit 300 s; network cut or every frame rejected?)",
    )
    # without the market check the same beat is healthy: the check is what catches it
    assert check_health(tmp_path / "heartbeat", 90, now).healthy


def test_health_is_fine_while_any_stream_is_fresh_and_counts_the_beats_age(
    tmp_path: Path,
) -> None:
    clock = VirtualClock(epoch_ms=1_700_000_000_000)
    t = 1_700_000_000_000
    path = _beat(
        tmp_path, clock, market={"BTC/USDT 15m": _stream(t, 5.0), "ETH/USDT 1h": _stream(t, 900.0)}
    )
    now = path.stat().st_mtime
    ok = check_health(path, 90, now, market_stale_secs=300)
    assert ok.healthy and "market" in ok.reason
    path = _beat(tmp_path, clock, market={"BTC/USDT 15m": _stream(t, 250.0)})
    assert check_health(path, 90, path.stat().st_mtime, market_stale_secs=300).healthy
    stale = check_health(path, 90, path.stat().st_mtime + 60, market_stale_secs=300)
    assert not stale.healthy and "for 310 s" in stale.reason


def test_health_fails_on_a_journal_fault_and_on_halted_trading_one_line_each(
    tmp_path: Path,
) -> None:
    clock = VirtualClock(epoch_ms=1_700_000_000_000)
    path = _beat(
        tmp_path,
        clock,
        market={"BTC/USDT 15m": _stream(None, 0.0)},
        journal_error="logs/decisions.jsonl: OSError: [Errno 28] No space left on device",
        trading={"mode": "halted", "reason": "broker disagreement", "by": "daemon"},
    )
    now = path.stat().st_mtime + 400  # also 400 s since watching started: no frame at all
    status = check_health(path, 900, now, market_stale_secs=300)
    assert not status.healthy
    assert [r.split(":")[0] for r in status.reasons] == ["market", "journal", "trading"]
    assert "No space left" in status.reasons[1]
    assert "HALTED by daemon: broker disagreement" in status.reasons[2]


def test_vigil_health_prints_one_line_per_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clock = VirtualClock(epoch_ms=int(time.time() * 1000))
    _beat(
        tmp_path,
        clock,
        market={"BTC/USDT 15m": _stream(clock.now_ms(), 1.0)},
        journal_error="disk full",
        trading={"mode": "halted", "reason": "audit", "by": "cli"},
    )
    assert main(["--state-dir", str(tmp_path), "health"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "unhealthy: journal: cannot be written (disk full)",
        "unhealthy: trading: HALTED by cli: audit (resume with `vigil trading resume`)",
    ]


def test_the_watchdog_records_the_last_valid_frame_per_stream() -> None:
    clock, bus = VirtualClock(epoch_ms=1_000_000), EventBus()
    dog = Watchdog(clock, bus, streams=["BTC/USDT 15m", "ETH/USDT 15m"])
    dog.on_market_data(_tick(1_000_000))
    assert dog.last_frames_ms() == {"BTC/USDT 15m": 1_000_000, "ETH/USDT 15m": None}
    report = dog.market_report()
    assert report["BTC/USDT 15m"]["last_frame_ms"] == 1_000_000
    assert report["ETH/USDT 15m"]["last_frame_ms"] is None


def test_a_heartbeat_dated_in_the_future_is_not_fresh(tmp_path: Path) -> None:
    """Its negative age read as fresh: a dead daemon looked alive until that time came."""
    path = tmp_path / "heartbeat"
    write_beat(path)
    os.utime(path, (1000.0, 1000.0))
    ahead = check_health(path, stale_secs=90, now_wall_secs=1000.0 - FUTURE_TOLERANCE_SECS - 1)
    assert not ahead.healthy and ahead.age_secs is None
    assert "heartbeat dated in the future: 6 s ahead" in ahead.reason
    jitter = check_health(path, stale_secs=90, now_wall_secs=1000.0 - FUTURE_TOLERANCE_SECS)
    assert jitter.healthy and jitter.age_secs == 0.0
