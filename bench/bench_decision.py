"""The rule-based decision with warm caches (issue 18: <= 1.5 ms a decision all-in with the fallback
decider): the decider alone (``decide``: 4h closes of each ticker + the pipeline) and all-in
(snapshot build + decide), p50/p95, on the decision path a fresh daemon has at 2025-07-01 (the same
offline root as ``bench_snapshot``). Two cases: the 4h history cache up to date, and one 4h close
newer than the cache (the stream closed a candle the REST refresh has not fetched yet)."""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from datetime import UTC, datetime

from agent.claude import ClaudeDecider
from agent.debate import DebateDecider
from agent.snapshot_builder import SnapshotBuilder
from core.events import MarketTick
from market.aggregator import MultiTFAggregator
from runner.config import Settings, SimConfig
from runner.prompt_cmd import offline_decision_path

AT = datetime(2025, 7, 1, tzinfo=UTC)
RUNS = 300
FOUR_H_MS = 4 * 3_600_000


async def _run() -> None:
    async with offline_decision_path(Settings(sim=SimConfig(start=AT))) as decision:
        decider = decision.agents.decider
        await _measure("history up to date", decision.snapshots, decider)
        # the market path's aggregator (the offline root yields the decision path only)
        aggregator = decision.runner._aggregator
        assert isinstance(aggregator, MultiTFAggregator)
        _close_one_more_4h(aggregator, AT)
        await _measure("one 4h close newer than the cache", decision.snapshots, decider)


async def _measure(
    case: str, builder: SnapshotBuilder, decider: ClaudeDecider | DebateDecider
) -> None:
    snap = await builder.build(["warm"])
    await decider.decide(snap)
    decide_ms, all_in_ms = [], []
    for _ in range(RUNS):
        started = time.perf_counter()
        snap = await builder.build(["candle_close:BTC/USDT:1h"])
        built = time.perf_counter()
        decided = await decider.decide(snap)
        done = time.perf_counter()
        decide_ms.append((done - built) * 1000.0)
        all_in_ms.append((done - started) * 1000.0)
    assert decided.decided_by == "fallback", decided.decider_reason
    load = os.getloadavg()[0]
    for what, times in (("fallback decide", decide_ms), ("all-in (snapshot + decide)", all_in_ms)):
        print(
            f"{case}: {what}: p50 {statistics.median(times):.3f} ms, "
            f"p95 {sorted(times)[int(RUNS * 0.95)]:.3f} ms over {RUNS} (load {load:.1f})"
        )


def _close_one_more_4h(aggregator: MultiTFAggregator, at: datetime) -> None:
    """The 4h candle opening at ``at`` closed on the stream for every ticker: the aggregator then
    holds a closed 4h candle the history cache (cut at ``at``) does not."""
    open_ms = int(at.timestamp() * 1000)
    for ticker in ("BTC/USDT", "ETH/USDT", "SOL/USDT"):
        last = aggregator.last_closed(ticker, "4h")
        price = (last.close if last is not None else 100.0) * 1.01
        aggregator.update(
            MarketTick(
                ticker=ticker,
                timeframe="4h",
                open_time_ms=open_ms,
                close_time_ms=open_ms + FOUR_H_MS - 1,
                open=price,
                high=price,
                low=price,
                close=price,
                volume=1.0,
                closed=True,
                event_time_ms=open_ms + FOUR_H_MS,
            )
        )
        assert aggregator.last_closed(ticker, "4h") != last


def main() -> None:
    asyncio.run(_run())


if __name__ == "__main__":
    main()
