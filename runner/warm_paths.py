"""Warm-up of a wired daemon's market and decision paths, shared by the daemon, replay and
``vigil prompt``. Its own module so that a replay does not import the daemon's composition (and,
through the operator's API, FastAPI) to warm up."""

from __future__ import annotations

from contextlib import nullcontext

from core.clock import Clock
from core.scaled_clock import ScaledClock
from runner.config import Settings
from runner.market_wiring import MarketPath
from runner.warmup import warm_up
from runner.wiring import DecisionPath

WARM_UP_TIMEOUT_SECS = 120.0


async def warm_up_paths(
    settings: Settings,
    clock: Clock,
    market: MarketPath,
    decision: DecisionPath,
    *,
    timeout_secs: float = WARM_UP_TIMEOUT_SECS,
) -> None:
    """``runner.warmup.warm_up`` for a wired daemon (live, simulator or replay).

    Against the simulator the scaled clock is held meanwhile: warm-up takes seconds of wall time,
    hours of simulated time at high speed, and a daemon that started trading that much later (how
    much later depending on the machine) would meet another market than the one it was started at.
    (A request retried on the held clock would wait for ``timeout_secs`` of real time.)"""
    with clock.hold() if isinstance(clock, ScaledClock) else nullcontext():
        await warm_up(
            clock,
            market.backfill,
            market.aggregator,
            market.ticks,
            market.history,
            decision.regimes,
            settings.market.tickers,
            settings.market.timeframes,
            timeout_secs=timeout_secs,
        )
