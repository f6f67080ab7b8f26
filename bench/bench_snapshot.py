"""Snapshot build time with warm caches: aggregator seeded with 5 days of recorded candles, HMM
regimes fitted on 180 days of 4h history, a paper broker, the macro source answering unavailable."""

from __future__ import annotations

import asyncio
import statistics
import time

from broker.paper import PaperBroker
from market.aggregator import MultiTFAggregator
from market.features import FeatureTracker
from market.recorded import load_klines, resample
from regime.crypto_hmm import CryptoRegimeModel
from regime.fred import FredSource
from regime.tracker import CryptoRegimeTracker
from runner.bus import EventBus
from runner.clock import VirtualClock
from runner.events import Candle, MarketTick
from runner.snapshot_builder import SnapshotBuilder

TICKERS = ("BTC/USDT", "ETH/USDT", "SOL/USDT")
AT_MS = 1_751_328_000_000  # 2025-07-01 00:00 UTC
RUNS = 300


def _candles(frame: object) -> list[Candle]:
    return [
        Candle(open_time_ms=int(t), open=o, high=h, low=lo, close=c, volume=v)
        for t, o, h, lo, c, v in frame.itertuples(index=True, name=None)  # type: ignore[attr-defined]
    ]


async def _run() -> None:
    clock = VirtualClock(epoch_ms=AT_MS)
    features = FeatureTracker()
    agg = MultiTFAggregator(EventBus(), observers=[features])
    tracker = CryptoRegimeTracker(clock, CryptoRegimeModel)
    for ticker in TICKERS:
        five = load_klines(ticker, "5m")
        recent = five[(five.index >= AT_MS - 5 * 86_400_000) & (five.index < AT_MS)]
        for tf in ("15m", "1h", "4h"):
            agg.seed(ticker, tf, _candles(resample(recent, "5m", tf)))
        hourly = load_klines(ticker, "1h")
        four = resample(
            hourly[(hourly.index >= AT_MS - 180 * 86_400_000) & (hourly.index < AT_MS)], "1h", "4h"
        )
        await tracker.on_4h_close(ticker, four)
        last = agg.last_closed(ticker, "15m")
        assert last is not None
        agg.update(
            MarketTick(
                ticker=ticker,
                timeframe="15m",
                open_time_ms=AT_MS,
                close_time_ms=AT_MS + 899_999,
                open=last.close,
                high=last.close,
                low=last.close,
                close=last.close,
                volume=1.0,
                closed=False,
                event_time_ms=AT_MS + 250,
            )
        )
    macro = FredSource(clock, api_key=None)

    from runner.regime_view import RegimeView

    class _History:
        timeframe = "4h"

    regimes = RegimeView(tracker, macro, _History(), TICKERS)  # type: ignore[arg-type]
    builder = SnapshotBuilder(
        clock,
        tickers=TICKERS,
        market=agg,
        features=features,
        broker=PaperBroker(clock),
        agent_memory=lambda: "BTC chops in ranges on weekends.",
        peak_prices=dict,
        regime=regimes.snapshot,
    )
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
    print(
        f"snapshot serialise: {serialise_ms:.3f} ms, {size} bytes compact JSON; "
        f"regime {snap.regime.combined if snap.regime else None}"
    )


def main() -> None:
    asyncio.run(_run())


if __name__ == "__main__":
    main()
