"""Helpers shared by the gate unit tests (no tests here): ticks, features, a gate on a VirtualClock."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from core.clock import VirtualClock
from core.events import MarketTick, Timeframe
from gate.gate import AdaptiveGate, GateConfig, GateVerdict
from market.features import TickFeatures

T0_MS = 1_740_787_200_000  # 2025-03-01 00:00 UTC


def make_tick(
    ticker: str = "BTC/USDT",
    *,
    timeframe: Timeframe = "15m",
    closed: bool = False,
    price: float = 95_000.0,
    event_ms: int = T0_MS,
) -> MarketTick:
    return MarketTick(
        ticker=ticker,
        timeframe=timeframe,
        open_time_ms=T0_MS,
        close_time_ms=T0_MS + 899_999,
        open=price,
        high=price,
        low=price,
        close=price,
        volume=1.0,
        closed=closed,
        event_time_ms=event_ms,
    )


def make_features(
    ticker: str = "BTC/USDT", *, zscore: float | None = 0.0, price: float = 95_000.0
) -> TickFeatures:
    return TickFeatures(
        ticker=ticker,
        at_ms=T0_MS,
        price=price,
        change_1h_pct=0.5,
        change_4h_pct=-1.0,
        change_24h_pct=2.0,
        volume_ratio=1.1,
        return_zscore=zscore,
    )


def advance(clock: VirtualClock, secs: float) -> None:
    """Move a VirtualClock from synchronous code (nothing sleeps on it in these tests)."""
    asyncio.run(clock.advance(secs))


@dataclass
class GateRig:
    """A gate on a VirtualClock plus the metric values its conditions read."""

    clock: VirtualClock
    gate: AdaptiveGate
    metrics: dict[str, float] = field(default_factory=dict)

    def tick(
        self,
        ticker: str = "BTC/USDT",
        *,
        closed: bool = False,
        zscore: float | None = 0.0,
        timeframe: Timeframe = "15m",
    ) -> GateVerdict:
        return self.gate.evaluate(
            make_tick(ticker, closed=closed, timeframe=timeframe),
            make_features(ticker, zscore=zscore),
            self.metrics,
        )

    def advance(self, secs: float) -> None:
        advance(self.clock, secs)

    def advance_to(self, monotonic_secs: float) -> None:
        asyncio.run(self.clock.advance_to(monotonic_secs))


def rig(**config: Any) -> GateRig:
    clock = VirtualClock(epoch_ms=T0_MS)
    return GateRig(clock=clock, gate=AdaptiveGate(clock, GateConfig(**config)))
