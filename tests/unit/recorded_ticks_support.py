"""Helpers for the RecordedTicks tests (no tests here): a synthetic recording and a clock driver."""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from core.bus import EventBus
from core.clock import VirtualClock
from core.events import Event, MarketTick, Topic
from sim.feed import BAR_MS, FUNDING_INTERVAL_MS

SYNTH_START_MS = 1_700_006_400_000  # a 4h boundary
DAY_MS = 86_400_000


def synthetic_bars(days: int, seed: int = 11) -> pd.DataFrame:
    """A random walk of 5m bars at 0.1 price / 0.001 volume precision, like a real symbol."""
    bars = days * 288
    rng = np.random.default_rng(seed)
    close = 100 + np.cumsum(rng.normal(0, 0.5, bars)).round(1)
    open_ = np.concatenate([[100.0], close[:-1]])
    high = (np.maximum(open_, close) + rng.uniform(0, 1, bars)).round(1)
    low = (np.minimum(open_, close) - rng.uniform(0, 1, bars)).round(1)
    volume = rng.uniform(1, 50, bars).round(3)
    index = SYNTH_START_MS + BAR_MS * np.arange(bars, dtype=np.int64)
    return pd.DataFrame(
        {"open": open_, "high": high, "low": low, "close": close, "volume": volume}, index=index
    )


def write_recording(root: Path, symbol: str, bars: pd.DataFrame) -> Path:
    """``root`` laid out as the bundled data/ folder (5m klines and funding of one symbol)."""
    folder = root / "binance-usdm"
    folder.mkdir(parents=True, exist_ok=True)
    with gzip.open(folder / f"{symbol}-5m.csv.gz", "wt") as out:
        bars.to_csv(out, index_label="open_time_ms")
    first_ms = int(bars.index[0])
    times = first_ms + FUNDING_INTERVAL_MS * np.arange(3, dtype=np.int64)
    funding = pd.DataFrame({"funding_rate": [1e-4, -1e-4, 2e-4]}, index=times)
    with gzip.open(folder / f"{symbol}-funding.csv.gz", "wt") as out:
        funding.to_csv(out, index_label="funding_time_ms")
    return root


class TickLog:
    """Every MarketTick published on a bus, with the clock reading at the moment it was published."""

    def __init__(self, bus: EventBus, clock: VirtualClock) -> None:
        self.ticks: list[MarketTick] = []
        self.published_at_ms: list[int] = []
        self._clock = clock
        bus.subscribe(Topic.MARKET_TICK, self._on_tick, name="test.tick_log")

    def _on_tick(self, event: Event) -> None:
        assert isinstance(event, MarketTick)
        self.ticks.append(event)
        self.published_at_ms.append(self._clock.now_ms())


async def until(condition: Callable[[], bool], turns: int = 100_000) -> None:
    """Yield to the event loop until ``condition()`` holds (bounded: a hang fails, not blocks)."""
    for _ in range(turns):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition never held")
