"""The analysts in a worker process write what the inline desk writes, and read the same views."""

from __future__ import annotations

import asyncio
import logging
import math
import multiprocessing
import os
import random
import signal
import sqlite3
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

import orjson
import pytest
from analyst_support import DAY1_MS, HOUR_MS

import runner.desk_ahead
from core.clock import utc_minute
from memory.analyst_model import AnalystReport, MemorySummary, utc_day
from memory.analyst_store import AnalystStore
from memory.analysts import AnalystController, AnalystDesk
from runner.desk_ahead import MIN_DESK_DAYS, AnalystsFailed, DeskAhead, open_desk_pool

TICKERS = ("BTC/USDT", "ETH/USDT")
DAY_MS = 24 * HOUR_MS
REGIMES = ("low_volatility", "medium_volatility", "high_volatility")


def _view(rng: random.Random, price: float) -> dict[str, Any]:
    def frame() -> dict[str, Any]:
        return {
            "trend": rng.choice(("up", "down", "flat")),
            "rsi": round(rng.uniform(20, 80), 2),
            "bollinger_position": round(rng.uniform(-0.2, 1.2), 4),
        }

    return {
        "price": price,
        "change_1h_pct": round(rng.gauss(0, 1), 3),
        "return_4h_pct": rng.choice((None, round(rng.gauss(0, 2), 3))),
        "return_24h_pct": round(rng.gauss(0, 3), 3),
        # a NaN is sent as null in the JSON: the builders read both as missing
        "return_zscore": rng.choice((math.nan, 0, -0.0, round(rng.gauss(0, 1), 4))),
        "multi_tf": {tf: frame() for tf in ("15m", "1h", "4h")},
    }


def _sent(rng: random.Random, at_ms: int, regimes: dict[str, str]) -> dict[str, Any]:
    """A snapshot as sent: plain JSON, with the analysts' fields varying (``regimes`` change a
    few times a day, outside data comes and goes)."""
    for ticker in TICKERS:  # each ticker's regime holds a while, then changes
        if rng.random() < 0.15:
            regimes[ticker] = rng.choice(REGIMES)
    return {
        "at_ms": at_ms,
        "tickers": {t: _view(rng, 1_000.0 * (i + 1) + rng.uniform(-50, 50)) for i, t in enumerate(TICKERS)},
        "funding_rates": {t: round(rng.gauss(0, 1e-4), 8) for t in TICKERS} if rng.random() < 0.8 else None,
        "open_interest": None,
        "basis": {"BTC/USDT": {"basis_pct": 0.1, "at_ms": at_ms}} if rng.random() < 0.3 else None,
        "stablecoin_supply": {"usdt": 1e11, "usdc": 4.5e10} if rng.random() < 0.5 else None,
        "fear_greed": {"value": rng.randint(0, 100), "classification": "Fear"} if rng.random() < 0.9 else None,
        "news_summary": rng.choice((None, "", "BTC, SOL trending")),
        "regime": {
            "crypto": dict(regimes),
            "crypto_exposure": {t: 0.8 for t in TICKERS},
            "macro": "UNAVAILABLE",
            "combined": "mixed",
            "exposure_scale": rng.choice((0.5, 0.8, 1)),
        },
        "derivatives_signal": rng.choice((None, 0.1, -0.25)),
        "unavailable": {"open_interest": "not in the recording"},
    }  # fmt: skip


def _decisions(seed: int = 7, days: int = 4) -> list[tuple[int, dict[str, Any]]]:
    """Decisions over ``days`` UTC days at irregular times (one just before and one just after
    midnight, a day with none), each with its snapshot."""
    rng = random.Random(seed)
    times = {DAY1_MS + d * DAY_MS + rng.randrange(DAY_MS) for d in range(days) for _ in range(25)}
    times |= {DAY1_MS + 2 * DAY_MS - 1, DAY1_MS + 2 * DAY_MS}
    times = {t for t in times if not DAY1_MS + 2 * DAY_MS < t < DAY1_MS + 3 * DAY_MS}
    regimes = dict.fromkeys(TICKERS, REGIMES[1])
    return [(at_ms, _sent(rng, at_ms, regimes)) for at_ms in sorted(times)]


def _encoded(sent: dict[str, Any]) -> Callable[[], bytes]:
    """``sent``'s JSON when asked for, as ``MarketSnapshot.to_json_bytes``."""
    return lambda: orjson.dumps(sent, option=orjson.OPT_SORT_KEYS)


def _run(desk: AnalystDesk, decisions: list[tuple[int, dict[str, Any]]]) -> list[Any]:
    """What ``DecisionContext.prepare`` and the prompt do per decision; the views read."""
    read: list[list[MemorySummary]] = []

    async def run() -> None:
        for at_ms, sent in decisions:
            try:
                await desk.roll(at_ms)
                desk.observe(sent, at_ms, _encoded(sent))
            except Exception:
                logging.getLogger(__name__).exception("analysts failed (inline)")
            read.extend(desk.summaries_for(t, at_ms) for t in TICKERS)
        desk.flush()

    asyncio.run(run())
    return read


def _dump(path: Path) -> list[str]:
    with sqlite3.connect(path) as db:
        return list(db.iterdump())


def _inline(path: Path, decisions: list[tuple[int, dict[str, Any]]]) -> tuple[list[Any], list[str]]:
    desk = AnalystDesk(AnalystStore(path, durable=False), TICKERS)
    read = _run(desk, decisions)
    desk.store.close()
    return read, _dump(path)


def _spawn_pool() -> ProcessPoolExecutor:
    return ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))


@pytest.fixture(scope="module")
def pool() -> Iterator[ProcessPoolExecutor]:
    executor = _spawn_pool()
    yield executor
    executor.shutdown(wait=True, cancel_futures=True)


@pytest.fixture(scope="module")
def decisions() -> list[tuple[int, dict[str, Any]]]:
    return _decisions()


@pytest.fixture(scope="module")
def inline(
    decisions: list[tuple[int, dict[str, Any]]], tmp_path_factory: pytest.TempPathFactory
) -> tuple[list[Any], list[str]]:
    return _inline(tmp_path_factory.mktemp("inline") / "analysts.db", decisions)


@pytest.mark.parametrize("batch", [1, 7, 64])
def test_off_process_desk_writes_and_reads_what_the_inline_desk_does(
    pool: ProcessPoolExecutor,
    decisions: list[tuple[int, dict[str, Any]]],
    inline: tuple[list[Any], list[str]],
    tmp_path: Path,
    batch: int,
) -> None:
    path = tmp_path / "analysts.db"
    desk = DeskAhead(AnalystStore(path, durable=False), str(path), TICKERS, pool, batch=batch)
    read = _run(desk, decisions)
    assert desk.unavailable is None  # every observe and roll ran in the worker
    views, dump = inline
    assert sum(1 for line in dump if 'INSERT INTO "analyst_summaries"' in line) >= 16
    assert read == views
    assert _dump(path) == dump


def test_a_failing_observe_is_logged_and_the_decisions_go_on(
    pool: ProcessPoolExecutor,
    decisions: list[tuple[int, dict[str, Any]]],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    broken_at, sent = decisions[30]
    bad = {**sent, "tickers": {"BTC/USDT": {"price": 1.0, "multi_tf": "not a mapping"}}}
    altered = [*decisions[:30], (broken_at, bad), *decisions[31:]]
    path = tmp_path / "analysts.db"
    desk = DeskAhead(AnalystStore(path, durable=False), str(path), TICKERS, pool, batch=8)
    with caplog.at_level(logging.ERROR, logger="runner.desk_ahead"):
        read = _run(desk, altered)
    failed = [r for r in caplog.records if "analysts failed for the decision" in r.getMessage()]
    assert len(failed) == 1
    assert utc_minute(broken_at) in failed[0].getMessage()
    assert "AttributeError" in failed[0].getMessage()
    # the decisions after it have their reports and summaries, as inline
    inline_read, dump = _inline(tmp_path / "inline.db", altered)
    assert read == inline_read
    assert _dump(path) == dump
    last_id = AnalystReport.make_id("market", "BTC/USDT", altered[-1][0])
    assert any(f"'{last_id}'" in line for line in dump)


def test_a_dead_worker_leaves_the_desk_inline_with_nothing_lost(
    decisions: list[tuple[int, dict[str, Any]]],
    inline: tuple[list[Any], list[str]],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    own = _spawn_pool()
    path = tmp_path / "analysts.db"
    desk = DeskAhead(AnalystStore(path, durable=False), str(path), TICKERS, own, batch=4)
    half = len(decisions) // 2
    try:
        read = _run(desk, decisions[:half])
        assert not desk.unavailable  # the worker still serves
        # killed with a batch sent since its last commit (the flush above committed; these not)
        asyncio.run(_observe_only(desk, decisions[half : half + 6]))
        (process,) = own._processes.values()
        assert process.pid is not None
        os.kill(process.pid, signal.SIGKILL)
        process.join()
        with caplog.at_level(logging.WARNING, logger="runner.desk_ahead"):
            read += _run(desk, decisions[half + 6 :])
    finally:
        own.shutdown(wait=True, cancel_futures=True)
    assert desk.unavailable is not None
    assert any("analysts' process is gone" in r.getMessage() for r in caplog.records)
    views, dump = inline
    # the six decisions observed but never read back: their views are the inline run's
    assert read == views[: 2 * half] + views[2 * (half + 6) :]
    assert _dump(path) == dump


class _DiesAfterCommitting(Executor):
    """Runs each job in a thread of this process (``run_desk_job``, on a desk of its own: its
    rolls run their own event loop) and, at the ``rolls``-th roll, dies once the job has
    committed, before its reply is taken."""

    def __init__(self, rolls: int) -> None:
        self.rolls = rolls
        self.gone = False
        self.thread = ThreadPoolExecutor(1)

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        if self.gone:
            raise BrokenProcessPool("the analysts' process is gone")
        future: Future[Any] = Future()
        reply = self.thread.submit(fn, *args, **kwargs).result()
        self.rolls -= args[0].roll_at_ms is not None
        if self.rolls == 0:
            self.gone = True
            future.set_exception(BrokenProcessPool("killed after its commit"))
        else:
            future.set_result(reply)
        return future


def test_a_worker_dead_after_committing_a_roll_is_not_observed_again(
    decisions: list[tuple[int, dict[str, Any]]],
    inline: tuple[list[Any], list[str]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(runner.desk_ahead, "_opened", {})  # this process's worker desk
    path = tmp_path / "analysts.db"
    pool = _DiesAfterCommitting(rolls=2)  # the first roll is made here (not a job)
    desk = DeskAhead(AnalystStore(path, durable=False), str(path), TICKERS, pool, batch=5)
    try:
        read = _run(desk, decisions)
    finally:
        pool.thread.shutdown()
    assert pool.gone and desk.unavailable is not None
    views, dump = inline
    assert read == views
    assert _dump(path) == dump


def test_a_failing_roll_fails_its_decision_and_is_tried_again_as_inline(
    decisions: list[tuple[int, dict[str, Any]]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A roll that raises part-way (some summaries made) fails that decision's analysts (its
    observe skipped) and is tried again at the next decision: the same database and views as
    inline, where the half-made summaries are read too."""
    monkeypatch.setattr(runner.desk_ahead, "_opened", {})  # this process's worker desk
    real = AnalystController.summarise
    broken_day = utc_day(DAY1_MS + DAY_MS)
    calls = [0]

    async def summarise(self: AnalystController, *args: Any, **kwargs: Any) -> Any:
        if args[1] == broken_day:
            calls[0] += 1
            if calls[0] == 3:
                raise RuntimeError("the summariser broke")
        return await real(self, *args, **kwargs)

    monkeypatch.setattr(AnalystController, "summarise", summarise)
    views, dump = _inline(tmp_path / "inline.db", decisions)
    assert calls[0] > 3  # it broke once, and was tried again
    calls[0] = 0
    path = tmp_path / "analysts.db"
    pool = _DiesAfterCommitting(rolls=-1)  # never dies
    desk = DeskAhead(AnalystStore(path, durable=False), str(path), TICKERS, pool, batch=5)
    with caplog.at_level(logging.ERROR):
        try:
            read = _run(desk, decisions)
        finally:
            pool.thread.shutdown()
    assert desk.unavailable is None
    assert any("the summariser broke" in r.getMessage() for r in caplog.records)
    failed = [r for r in caplog.records if r.exc_info and r.exc_info[0] is AnalystsFailed]
    assert len(failed) == 1  # the decision's analysts failed, as inline
    assert read == views
    assert _dump(path) == dump


class _Recording(_DiesAfterCommitting):
    """Never dies; keeps each job it was given."""

    def __init__(self) -> None:
        super().__init__(rolls=-1)
        self.jobs: list[Any] = []

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        self.jobs.append(args[0])
        return super().submit(fn, *args, **kwargs)


def test_the_first_roll_is_made_here_without_waiting_for_the_worker(
    decisions: list[tuple[int, dict[str, Any]]],
    inline: tuple[list[Any], list[str]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Nothing was sent to the worker yet (it may still be starting): the first roll reads only
    what this store reads, so it is made here; the worker rolls from the next day on."""
    monkeypatch.setattr(runner.desk_ahead, "_opened", {})  # this process's worker desk
    path = tmp_path / "analysts.db"
    pool = _Recording()
    desk = DeskAhead(AnalystStore(path, durable=False), str(path), TICKERS, pool, batch=5)
    try:
        read = _run(desk, decisions)
    finally:
        pool.thread.shutdown()
    rolled = [utc_day(job.roll_at_ms) for job in pool.jobs if job.roll_at_ms is not None]
    first_day = utc_day(decisions[0][0])
    assert rolled and first_day not in rolled
    assert desk.unavailable is None
    views, dump = inline
    assert read == views
    assert _dump(path) == dump


def test_a_first_roll_over_an_earlier_runs_reports_is_made_here_as_inline(
    decisions: list[tuple[int, dict[str, Any]]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A database with reports of an earlier run: the first roll summarises them here (and
    commits), the worker reads those summaries as done; the same as two inline desks."""
    monkeypatch.setattr(runner.desk_ahead, "_opened", {})  # this process's worker desk
    # the earlier run ends before the second day's midnight decision; the next starts after it
    half = next(i for i, (at_ms, _) in enumerate(decisions) if at_ms >= DAY1_MS + 2 * DAY_MS)
    expected = tmp_path / "inline.db"
    _inline(expected, decisions[:half])
    views, dump = _inline(expected, decisions[half:])
    path = tmp_path / "analysts.db"
    _inline(path, decisions[:half])
    pool = _Recording()
    desk = DeskAhead(AnalystStore(path, durable=False), str(path), TICKERS, pool, batch=5)
    try:
        read = _run(desk, decisions[half:])
    finally:
        pool.thread.shutdown()
    assert desk.rolled_day is not None and desk.unavailable is None
    assert any(job.roll_at_ms is not None for job in pool.jobs)  # later rolls went there
    assert read == views
    assert _dump(path) == dump


async def _observe_only(desk: AnalystDesk, decisions: list[tuple[int, dict[str, Any]]]) -> None:
    for at_ms, sent in decisions:
        await desk.roll(at_ms)
        desk.observe(sent, at_ms, _encoded(sent))


def test_the_pool_is_not_opened_on_one_core_or_in_a_daemonic_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    assert open_desk_pool(MIN_DESK_DAYS) is None
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(multiprocessing.current_process(), "daemon", True, raising=False)
    assert open_desk_pool(MIN_DESK_DAYS) is None


def test_a_short_replay_runs_its_analysts_in_its_own_process(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="runner.desk_ahead")
    assert open_desk_pool(MIN_DESK_DAYS - 1) is None
    assert "a short replay" in caplog.text
