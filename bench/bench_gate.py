"""AdaptiveGate.evaluate cost per tick: prints ns/tick and allocated blocks per tick per scenario.

Scenarios (replay-shaped: VirtualClock, ticks of 3 tickers, none closed):
- open, no conditions: nothing holds, the gate is out of its cooldown;
- open, 10 conditions: ten level/crossing conditions over tick metrics, none holding;
- cooldown, quiet: just passed, nothing holds;
- cooldown, all layers holding: timer due, |z| over the limit and 10 conditions holding, denied;
- open, 10 conditions + MetricBoard.update_features: what the tick path pays with its feeder.

Run: ``.venv/bin/python -m bench.bench_gate`` (or ``make bench``).
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import sys
import time
from collections.abc import Callable

from core.clock import VirtualClock
from core.events import MarketTick
from gate.conditions import METRICS
from gate.gate import AdaptiveGate, GateConfig
from gate.metrics import MetricBoard
from market.features import TickFeatures

TICKERS = ("BTC/USDT", "ETH/USDT", "SOL/USDT")
PRICES = {"BTC/USDT": 95_000.0, "ETH/USDT": 3_300.0, "SOL/USDT": 190.0}
T0_MS = 1_740_787_200_000
TICKS_PER_ROUND = 30_000
ROUNDS = 7


def _ticks() -> list[tuple[MarketTick, TickFeatures]]:
    out = []
    for i in range(300):
        ticker = TICKERS[i % 3]
        price = PRICES[ticker] * (1 + 0.0001 * (i % 7))
        tick = MarketTick(
            ticker=ticker,
            timeframe="15m",
            open_time_ms=T0_MS,
            close_time_ms=T0_MS + 899_999,
            open=price,
            high=price,
            low=price,
            close=price,
            volume=1.0,
            closed=False,
            event_time_ms=T0_MS + 250 * i,
        )
        features = TickFeatures(
            ticker=ticker,
            at_ms=tick.event_time_ms,
            price=price,
            change_1h_pct=0.4,
            change_4h_pct=-1.1,
            change_24h_pct=2.5,
            volume_ratio=1.2,
            return_zscore=0.3 + 0.01 * (i % 5),
        )
        out.append((tick, features))
    return out


def _conditions(holding: bool) -> list[dict[str, object]]:
    """Ten conditions over tick metrics; ``holding`` picks thresholds the bench values satisfy."""
    far = 1e9
    return [
        {"metric": "btc_price", "operator": "lt", "threshold": far if holding else 1.0},
        {"metric": "btc_price", "operator": "gt", "threshold": 1.0 if holding else far},
        {"metric": "eth_price", "operator": "lte", "threshold": far if holding else 1.0},
        {"metric": "eth_price", "operator": "gte", "threshold": 1.0 if holding else far},
        {"metric": "sol_change_1h_pct", "operator": "abs_gt", "threshold": 0.1 if holding else 50},
        {"metric": "btc_change_4h_pct", "operator": "abs_lt", "threshold": 50 if holding else 0.1},
        {"metric": "btc_return_zscore", "operator": "crosses_above", "threshold": 3.0},
        {"metric": "eth_price", "operator": "crosses_below", "threshold": 100.0},
        {"metric": "sol_volume_ratio", "operator": "gt", "threshold": 0.5 if holding else 50},
        {"metric": "btc_change_24h_pct", "operator": "lt", "threshold": 50 if holding else -50},
    ]


def _board(ticks: list[tuple[MarketTick, TickFeatures]]) -> MetricBoard:
    board = MetricBoard(METRICS)
    for _, features in ticks[:3]:
        board.update_features(features)
    return board


def _measure(run: Callable[[int], None]) -> tuple[float, float]:
    """Median ns per tick over ROUNDS rounds, and net allocated blocks per tick."""
    run(TICKS_PER_ROUND)  # warm up
    samples = []
    gc.disable()
    try:
        blocks_before = sys.getallocatedblocks()
        for _ in range(ROUNDS):
            start = time.perf_counter_ns()
            run(TICKS_PER_ROUND)
            samples.append((time.perf_counter_ns() - start) / TICKS_PER_ROUND)
        blocks = (sys.getallocatedblocks() - blocks_before) / (ROUNDS * TICKS_PER_ROUND)
    finally:
        gc.enable()
    return statistics.median(samples), blocks


def _scenario(
    conditions: list[dict[str, object]],
    *,
    cooling: bool = False,
    anomalous: bool = False,
    feed_board: bool = False,
) -> Callable[[int], None]:
    clock = VirtualClock(epoch_ms=T0_MS)
    gate = AdaptiveGate(clock, GateConfig(cooldown_secs=1e9 if cooling else 120.0))
    ticks = _ticks()
    if anomalous:
        ticks = [(t, f.model_copy(update={"return_zscore": 3.5})) for t, f in ticks]
    board = _board(ticks)
    update = gate.update_from_agent(60 if cooling else 3600, conditions)
    assert not update.rejected, update.rejected
    if cooling:
        closed = ticks[0][0].model_copy(update={"closed": True})
        assert gate.evaluate(closed, ticks[0][1], board).passed
        asyncio.run(clock.advance(61))  # the timer is due too: every layer holds, cooldown denies
    pairs = ticks
    evaluate = gate.evaluate
    update_features = board.update_features

    def run(n: int) -> None:
        count = len(pairs)
        for i in range(n):
            tick, features = pairs[i % count]
            if feed_board:
                update_features(features)
            verdict = evaluate(tick, features, board)
            if verdict.passed:
                raise AssertionError(f"bench scenario passed unexpectedly: {verdict}")

    return run


def _baseline() -> Callable[[int], None]:
    """The loop alone, so the per-scenario figure can be read net of it."""
    pairs = _ticks()

    def run(n: int) -> None:
        count = len(pairs)
        for i in range(n):
            tick, features = pairs[i % count]
            if tick.closed or features.return_zscore is None:
                raise AssertionError("unexpected")

    return run


def main() -> None:
    scenarios: list[tuple[str, Callable[[int], None]]] = [
        ("loop overhead (no gate)", _baseline()),
        ("open, no conditions", _scenario([])),
        ("open, 10 conditions", _scenario(_conditions(holding=False))),
        ("cooldown, quiet", _scenario([], cooling=True)),
        (
            "cooldown, all layers holding",
            _scenario(_conditions(holding=True), cooling=True, anomalous=True),
        ),
        (
            "open, 10 conditions + board feed",
            _scenario(_conditions(holding=False), feed_board=True),
        ),
    ]
    print(f"AdaptiveGate.evaluate, {ROUNDS} x {TICKS_PER_ROUND} ticks per scenario (median)")
    print(f"{'scenario':<36} {'ns/tick':>9} {'blocks/tick':>12}")
    for name, run in scenarios:
        ns, blocks = _measure(run)
        print(f"{name:<36} {ns:>9.0f} {blocks:>12.4f}")


if __name__ == "__main__":
    main()
