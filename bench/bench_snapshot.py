"""Snapshot build time with warm caches: the builder a fresh daemon has at 2025-07-01 (warm-up
candles seeded, one HMM per ticker fitted on 180 days of 4h history, a paper account), from the
bundled data through ``runner.prompt_cmd.offline_decision_path`` (the real root on replay's ports)."""

from __future__ import annotations

import asyncio
import statistics
import time
from datetime import UTC, datetime

from agent.snapshot_builder import SnapshotBuilder
from runner.config import Settings, SimConfig
from runner.prompt_cmd import offline_decision_path

AT = datetime(2025, 7, 1, tzinfo=UTC)
RUNS = 300


async def _run() -> None:
    async with offline_decision_path(Settings(sim=SimConfig(start=AT))) as decision:
        await _measure(decision.snapshots)


async def _measure(builder: SnapshotBuilder) -> None:
    await builder.build(["warm"])
    times = []
    for _ in range(RUNS):
        started = time.perf_counter()
        snap = await builder.build(["candle_close:BTC/USDT:1h"])
        times.append((time.perf_counter() - started) * 1000.0)
    size = len(snap.to_json_bytes())
    started = time.perf_counter()
    for _ in range(RUNS):
        snap.to_json_bytes()
    serialise_ms = (time.perf_counter() - started) * 1000.0 / RUNS
    print(
        f"snapshot build (3 tickers, warm caches): median {statistics.median(times):.3f} ms, "
        f"p95 {sorted(times)[int(RUNS * 0.95)]:.3f} ms over {RUNS} builds"
    )
    regime = snap.regime.combined if snap.regime else None
    print(f"snapshot serialise: {serialise_ms:.3f} ms, {size} bytes compact JSON; regime {regime}")


def main() -> None:
    asyncio.run(_run())


if __name__ == "__main__":
    main()
