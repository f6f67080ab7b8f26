"""Hostile-frame fuzz through the real daemon: ``python -m bench fuzz_frames [--frames N]``.

``vigil run --sim`` is built in-process (``runner.app.build_daemon``), with a man in the middle
(``sim.hostile_proxy.HostileProxy``) between the simulator's websocket and the market listener:
it forwards the simulator's frames (the bundled recording of real Binance klines) and slips in
hostile ones made from them (``sim.hostile``: wrong types, missing fields, NaN/inf, huge numbers,
negative volumes, future/past times, early closes, spikes, wrong symbols, unicode, deep nesting,
truncated JSON, duplicated keys, garbage, oversized). The real captured Binance frames of
``tests/fixtures/binance-ws`` are sent too, as the old real frames they are (another day, other
intervals and contracts: each must be counted, never taken).

It runs until the listener has read ``--frames`` frames, then until one more decision is made,
and prints the frames, the injected kinds, the rejections by reason, the reconnects, the
decisions and the time taken. The run fails if no decision is made after the hostile frames.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from core.clock import Clock
from core.events import Candle
from gate.gate import GateConfig
from market.listener import MarketListener
from runner.app import build_daemon
from runner.config import MarketConfig, Settings, SimConfig
from runner.warm_paths import warm_up_paths
from sim.hostile_proxy import HostileProxy

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "binance-ws"
DEFAULT_FRAMES = 25_000


@dataclass
class FuzzFigures:
    frames: int = 0  # read by the listener
    ticks_published: int = 0
    forwarded: int = 0  # the simulator's frames through the proxy
    injected: dict[str, int] = field(default_factory=dict)  # hostile frames by kind
    rejected: dict[str, int] = field(default_factory=dict)
    reconnects: dict[str, int] = field(default_factory=dict)
    decisions_before: int = 0  # when the first hostile frame went out
    decisions_after: int = 0
    closes: int = 0
    bad_candles: int = 0  # closed candles kept with a non-finite or inconsistent number
    elapsed_secs: float = 0.0
    sim_secs: float = 0.0


def captured_frames() -> list[bytes]:
    """The real Binance frames of the fixtures, one per line."""
    return [
        line.encode()
        for path in sorted(FIXTURES.glob("*.jsonl"))
        for line in path.read_text().splitlines()
        if line.strip()
    ]


class _Proxy:
    """Builds the HostileProxy in front of the simulator once the daemon has a clock."""

    def __init__(self, rate: float, oversized_every: int, seed: int) -> None:
        self.rate, self.oversized_every, self.seed = rate, oversized_every, seed
        self.proxy: HostileProxy | None = None

    async def __call__(self, clock: Clock, upstream: str) -> str:
        self.proxy = HostileProxy(
            clock,
            upstream,
            rate=self.rate,
            oversized_every=self.oversized_every,
            seed=self.seed,
            extra_frames=captured_frames(),
        )
        return await self.proxy.start()


async def fuzz(
    state_dir: Path,
    *,
    frames: int,
    speed: float = 60.0,
    rate: float = 0.3,
    oversized_every: int = 5_000,
    seed: int = 7,
    timeout_secs: float = 600.0,
) -> FuzzFigures:
    settings = Settings(
        state_dir=state_dir,
        anthropic_api_key=None,
        log_level="WARNING",
        market=MarketConfig(source="sim", silence_timeout_secs=600.0),
        sim=SimConfig(speed=speed),
        gate=GateConfig(cooldown_secs=60.0),
    )
    front = _Proxy(rate, oversized_every, seed)
    daemon = await build_daemon(settings, ws_front=front)
    assert front.proxy is not None
    proxy, listener = front.proxy, daemon.market.ticks
    assert isinstance(listener, MarketListener)
    figures = FuzzFigures()
    await warm_up_paths(settings, daemon.clock, daemon.market, daemon.decision)
    started, sim_start_ms = time.perf_counter(), daemon.clock.now_ms()
    figures.decisions_before = daemon.decision.routine.runs
    supervised = asyncio.create_task(daemon.supervisor.run(), name="fuzz daemon")
    try:
        async with asyncio.timeout(timeout_secs):
            while listener.stats.frames < frames or (
                daemon.decision.routine.runs <= figures.decisions_before
            ):
                assert not supervised.done(), "the daemon stopped on its own"
                await asyncio.sleep(0.2)
            target_decisions = daemon.decision.routine.runs
            # and it still decides (a counter of the daemon's, polled: it has no event for it)
            while daemon.decision.routine.runs <= target_decisions:  # noqa: ASYNC110
                await asyncio.sleep(0.2)
    finally:
        daemon.supervisor.request_stop("fuzz done")
        await supervised
        await proxy.stop()
    stats = listener.stats
    figures.frames, figures.ticks_published = stats.frames, stats.ticks_published
    figures.forwarded, figures.injected = (
        proxy.forwarded,
        {str(kind): n for kind, n in sorted(proxy.counts.items())},
    )
    figures.rejected, figures.reconnects = dict(stats.rejected), dict(stats.reconnects)
    figures.decisions_after = daemon.decision.routine.runs
    figures.closes = daemon.market.aggregator.stats.closes_emitted
    figures.bad_candles = sum(
        not _sound(candle)
        for ticker in settings.market.tickers
        for timeframe in settings.market.timeframes
        for candle in daemon.market.aggregator.closed(ticker, timeframe)
    )
    figures.elapsed_secs = time.perf_counter() - started
    figures.sim_secs = (daemon.clock.now_ms() - sim_start_ms) / 1000.0
    return figures


def _sound(candle: Candle) -> bool:
    numbers = (candle.open, candle.high, candle.low, candle.close, candle.volume)
    return (
        all(math.isfinite(x) for x in numbers)
        and (
            0
            < candle.low
            <= min(candle.open, candle.close)
            <= max(candle.open, candle.close)
            <= candle.high
        )
        and candle.volume >= 0
    )


def report(figures: FuzzFigures) -> str:
    injected = sum(figures.injected.values())
    lines = [
        f"frames read by the listener: {figures.frames:,} ({figures.forwarded:,} from the "
        f"simulator, {injected:,} hostile) in {figures.elapsed_secs:.1f} s "
        f"({figures.sim_secs / 60:.0f} simulated minutes)",
        f"ticks published: {figures.ticks_published:,}; candle closes: {figures.closes:,} "
        f"({figures.bad_candles} with a bad number)",
        f"hostile frames injected by kind: {orjson.dumps(figures.injected).decode()}",
        f"rejected by reason ({sum(figures.rejected.values()):,}): "
        f"{orjson.dumps(figures.rejected).decode()}",
        f"reconnects by cause: {orjson.dumps(figures.reconnects).decode()}",
        f"decisions: {figures.decisions_before} before the first hostile frame, "
        f"{figures.decisions_after} at the end",
    ]
    return "\n".join("  " + line for line in lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench fuzz_frames")
    parser.add_argument("--frames", type=int, default=DEFAULT_FRAMES)
    parser.add_argument("--speed", type=float, default=60.0)
    parser.add_argument("--rate", type=float, default=0.3, help="hostile frames per good frame")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv or [])
    with tempfile.TemporaryDirectory(prefix="vigil-fuzz-") as tmp:
        figures = asyncio.run(
            fuzz(Path(tmp), frames=args.frames, speed=args.speed, rate=args.rate, seed=args.seed)
        )
    print(report(figures))
    if figures.decisions_after <= figures.decisions_before:
        raise SystemExit("no decision was made after the hostile frames")


if __name__ == "__main__":
    main()
