"""Tick rows computed ahead in a worker process publish exactly the direct path's ticks."""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import shutil
import signal
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from fakes.virtual_time import drive
from recorded_ticks_support import DAY_MS, SYNTH_START_MS, TickLog, synthetic_bars
from recorded_ticks_support import write_recording as write_symbol

import sim.recorded_ticks
from core.bus import EventBus
from core.clock import VirtualClock
from core.events import MarketTick, Timeframe
from market.recorded import DataUnavailableError
from sim.feed import BAR_MS, SimFeed
from sim.recorded_ticks import RecordedTicks
from sim.tick_ahead import MIN_TICKS_AHEAD, RowsAhead, open_tick_pool
from sim.tick_rows import ROW_WIDTH, instant_rows
from sim.ws_streams import KlineFormat

U = 60_000
TICKERS = ("BTC/USDT", "ETH/USDT")
TFS: tuple[Timeframe, ...] = ("5m", "15m", "1h", "4h")
DAYS = 3
HOLE_MS = SYNTH_START_MS + DAY_MS + 12 * 3_600_000 + 2 * BAR_MS  # an ETH bar missing, day 2
ETH_CUT_MS = SYNTH_START_MS + DAYS * DAY_MS - 6 * 3_600_000  # ETH's recording ends 6 h early


def write_recording(root: Path) -> Path:
    bars = synthetic_bars(days=DAYS)
    write_symbol(root, "BTCUSDT", bars)
    eth = synthetic_bars(days=DAYS, seed=12)
    eth = eth[(eth.index != HOLE_MS) & (eth.index < ETH_CUT_MS)]
    return write_symbol(root, "ETHUSDT", eth)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_recording(tmp_path_factory.mktemp("rec"))


@pytest.fixture(scope="module")
def feed(data_dir: Path) -> SimFeed:
    return SimFeed(TICKERS, data_dir=data_dir, update_interval_ms=U)


@pytest.fixture(scope="module")
def pool() -> Iterator[ProcessPoolExecutor]:
    executor = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
    yield executor
    executor.shutdown(cancel_futures=True)


async def replayed(
    feed: SimFeed,
    read_ahead: Executor | None,
    *,
    start_ms: int,
    down_at_ms: int | None = None,
    down_secs: float = 0.0,
    wait: bool = True,
) -> list[MarketTick]:
    """Every tick published from ``start_ms`` to the end of the recording; with ``down_at_ms`` the
    run is cancelled once the clock reaches it, the clock moves ``down_secs`` and it runs again.
    ``wait``: for the worker's first chunk before running (so every instant is the worker's)."""
    clock = VirtualClock(epoch_ms=start_ms)
    bus = EventBus()
    log = TickLog(bus, clock)
    source = RecordedTicks(clock, bus, feed, tickers=TICKERS, timeframes=TFS, read_ahead=read_ahead)
    source.prefetch(wait=wait)
    if down_at_ms is not None:
        task = asyncio.ensure_future(source.run())
        while clock.now_ms() < down_at_ms:
            if not await clock.step():
                await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await clock.advance(down_secs)
    await drive(clock, source.run())
    assert source.finished.is_set()
    return log.ticks


def as_json(ticks: list[MarketTick]) -> list[str]:
    return [tick.model_dump_json() for tick in ticks]


def no_direct_rows(*_args: object) -> object:
    raise AssertionError("the rows were computed in the replay's process")


async def test_read_ahead_publishes_the_direct_paths_ticks(
    feed: SimFeed, pool: ProcessPoolExecutor, monkeypatch: pytest.MonkeyPatch
) -> None:
    # down on the first day, back up on the third: the second day's chunk is skipped, and the
    # run carries on through the ETH hole and past the end of ETH's recording to BTC's
    kwargs: dict[str, Any] = {
        "start_ms": SYNTH_START_MS - 2 * BAR_MS,  # before the recording: nothing at first
        "down_at_ms": SYNTH_START_MS + DAY_MS - 7 * U,
        "down_secs": DAY_MS * 1.1 / 1000,
    }
    direct = await replayed(feed, None, **kwargs)
    monkeypatch.setattr(sim.recorded_ticks, "instant_rows", no_direct_rows)
    ahead = await replayed(feed, pool, **kwargs)
    assert as_json(ahead) == as_json(direct)
    # the span really holds what the test is about
    times = {(t.ticker, t.event_time_ms) for t in direct}
    assert ("ETH/USDT", HOLE_MS - U) in times and ("ETH/USDT", HOLE_MS) not in times
    assert max(at for ticker, at in times if ticker == "ETH/USDT") == ETH_CUT_MS - U
    assert direct[-1].ticker == "BTC/USDT"
    assert direct[-1].event_time_ms == SYNTH_START_MS + DAYS * DAY_MS - U


async def test_the_whole_recording_without_a_restart(
    feed: SimFeed, pool: ProcessPoolExecutor
) -> None:
    direct = await replayed(feed, None, start_ms=SYNTH_START_MS)
    ahead = await replayed(feed, pool, start_ms=SYNTH_START_MS)
    assert as_json(ahead) == as_json(direct)


def test_rows_ahead_equal_instant_rows_at_any_increasing_instants(
    feed: SimFeed, pool: ProcessPoolExecutor
) -> None:
    streams = [(t, tf, KlineFormat.of(feed, t)) for t in TICKERS for tf in TFS]
    stop_ms = SYNTH_START_MS + 2 * DAY_MS
    ahead = RowsAhead(pool, feed, streams, stop_ms, chunk_ms=3_600_000, depth=2)
    width = len(streams) * ROW_WIDTH
    ahead.prefetch(SYNTH_START_MS, wait=True)
    # every instant of an hour, then jumps within an hour, over several hours, to the last instant
    asked = [SYNTH_START_MS + k * U for k in range(60)]
    asked += [SYNTH_START_MS + 2 * 3_600_000 + k * U for k in (3, 4, 50)]
    asked += [SYNTH_START_MS + 7 * 3_600_000 - U, SYNTH_START_MS + DAY_MS, stop_ms]
    for at in asked:
        got = ahead.rows_at(at)
        assert got is not None
        rows, offset = got
        assert rows[offset : offset + width] == instant_rows(feed, streams, at, 1, U)


async def test_a_failure_in_the_worker_raises(
    data_dir: Path, pool: ProcessPoolExecutor, tmp_path: Path
) -> None:
    copied = shutil.copytree(data_dir, tmp_path / "rec")
    feed = SimFeed(TICKERS, data_dir=copied, update_interval_ms=U)
    shutil.rmtree(copied)  # the worker cannot open the feed this process holds
    with pytest.raises(DataUnavailableError):
        await replayed(feed, pool, start_ms=SYNTH_START_MS)


class Starting(Executor):
    """A pool whose worker never gets going."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        return Future()


async def test_instants_are_not_waited_for_while_the_worker_starts(feed: SimFeed) -> None:
    direct = await replayed(feed, None, start_ms=SYNTH_START_MS + DAY_MS)
    starting = await replayed(feed, Starting(), start_ms=SYNTH_START_MS + DAY_MS, wait=False)
    assert as_json(starting) == as_json(direct)


class NoProcess(Executor):
    """A pool whose process cannot start."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        raise OSError("Resource temporarily unavailable")


async def test_a_pool_that_cannot_start_falls_back_with_a_warning(
    feed: SimFeed, caplog: pytest.LogCaptureFixture
) -> None:
    direct = await replayed(feed, None, start_ms=SYNTH_START_MS + DAY_MS)
    with caplog.at_level(logging.WARNING, logger="sim.tick_ahead"):
        fallback = await replayed(feed, NoProcess(), start_ms=SYNTH_START_MS + DAY_MS)
    assert as_json(fallback) == as_json(direct)
    assert [r.message for r in caplog.records].count(
        "replay ticks: the worker process cannot start (Resource temporarily unavailable); "
        "computing inline"
    ) == 1


class KilledAtSecondChunk(Executor):
    """A real pool whose worker is killed (as by the OOM killer) once the second chunk is sent:
    the chunks after it can only fail."""

    def __init__(self, pool: ProcessPoolExecutor) -> None:
        self._pool = pool
        self._pid = pool.submit(os.getpid).result()
        self._submits = 0

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future = self._pool.submit(fn, *args, **kwargs)
        self._submits += 1
        if self._submits == 2:
            os.kill(self._pid, signal.SIGKILL)
        return future


async def test_a_killed_worker_falls_back_with_one_warning_and_the_same_ticks(
    feed: SimFeed, caplog: pytest.LogCaptureFixture
) -> None:
    direct = await replayed(feed, None, start_ms=SYNTH_START_MS)
    pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
    try:
        with caplog.at_level(logging.WARNING, logger="sim.tick_ahead"):
            killed = await replayed(feed, KilledAtSecondChunk(pool), start_ms=SYNTH_START_MS)
    finally:
        pool.shutdown(cancel_futures=True)
    assert as_json(killed) == as_json(direct)
    warnings = [r.message for r in caplog.records if "the worker process is gone" in r.message]
    assert len(warnings) == 1, warnings
    assert warnings[0].endswith("computing inline")


def test_no_pool_on_one_core(feed: SimFeed, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sim.tick_ahead.os.cpu_count", lambda: 1)
    assert open_tick_pool(feed, MIN_TICKS_AHEAD) is None


def test_no_pool_for_a_short_replay(feed: SimFeed, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="sim.tick_ahead")
    assert open_tick_pool(feed, MIN_TICKS_AHEAD - 1) is None
    assert "a short replay" in caplog.text


def test_bad_chunks_are_refused(feed: SimFeed, pool: ProcessPoolExecutor) -> None:
    streams = [(TICKERS[0], "5m", KlineFormat.of(feed, TICKERS[0]))]
    with pytest.raises(ValueError, match="multiple"):
        RowsAhead(pool, feed, streams, SYNTH_START_MS, chunk_ms=U + 1)
    with pytest.raises(ValueError, match="depth"):
        RowsAhead(pool, feed, streams, SYNTH_START_MS, depth=-1)
