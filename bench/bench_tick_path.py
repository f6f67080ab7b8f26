"""The in-process tick path: parse -> bus -> aggregator -> features, in µs per tick and ticks/s.

Frames are pre-serialised Binance combined-stream kline frames (3 tickers x 15m/1h/4h, a push every
250 ms per stream, a random-walk price, closing frames at every boundary), so only the path itself
is timed. Stages are measured cumulatively on the same frames, each on a fresh pipeline:

1. parse only (``parse_kline_frame``)
2. + ``bus.publish`` to the aggregator (forming/closed candles, ``CandleClosed``/``MarketGap``)
3. + the FeatureTracker fed by the aggregator (incremental state per tick)
4. + ``tracker.features(ticker)`` on every tick (what the gate reads: builds ``TickFeatures``)
"""

from __future__ import annotations

import gc
import random
import time
from collections.abc import Callable

import orjson

from core.bus import EventBus
from core.events import Topic
from market.aggregator import MultiTFAggregator
from market.features import FeatureTracker
from market.parse import parse_kline_frame
from market.timeframes import TIMEFRAME_MS, to_binance_symbol

TICKERS = ("BTC/USDT", "ETH/USDT", "SOL/USDT")
TIMEFRAMES = ("15m", "1h", "4h")
START_MS = 1_740_787_200_000  # 2025-03-01 00:00 UTC
PUSH_MS = 250
FRAMES = 200_000


def make_frames(count: int, seed: int = 1) -> list[bytes]:
    """``count`` frames cycling through every stream, as a Binance combined stream sends them."""
    rng = random.Random(seed)
    price = {ticker: 100.0 * (i + 1) for i, ticker in enumerate(TICKERS)}
    candles: dict[tuple[str, str], list[float]] = {}  # open_ms, o, h, l, v
    frames: list[bytes] = []
    now = START_MS
    while len(frames) < count:
        for ticker in TICKERS:
            price[ticker] *= 1.0 + rng.gauss(0.0, 0.0005)
            p = round(price[ticker], 2)
            traded = rng.random()
            symbol = to_binance_symbol(ticker)
            for tf in TIMEFRAMES:
                step = TIMEFRAME_MS[tf]
                open_ms = now - now % step
                state = candles.get((ticker, tf))
                if state is None or state[0] != open_ms:
                    state = [open_ms, p, p, p, 0.0]
                    candles[(ticker, tf)] = state
                state[2], state[3] = max(state[2], p), min(state[3], p)
                state[4] += traded
                closed = now + PUSH_MS >= open_ms + step
                frames.append(
                    orjson.dumps(
                        {
                            "stream": f"{symbol.lower()}@kline_{tf}",
                            "data": {
                                "e": "kline",
                                "E": now,
                                "s": symbol,
                                "k": {
                                    "t": open_ms,
                                    "T": open_ms + step - 1,
                                    "s": symbol,
                                    "i": tf,
                                    "f": 0,
                                    "L": 0,
                                    "o": f"{state[1]:.2f}",
                                    "c": f"{p:.2f}",
                                    "h": f"{state[2]:.2f}",
                                    "l": f"{state[3]:.2f}",
                                    "v": f"{state[4]:.3f}",
                                    "n": 0,
                                    "x": closed,
                                    "q": "0",
                                    "V": "0",
                                    "Q": "0",
                                    "B": "0",
                                },
                            },
                        }
                    )
                )
        now += PUSH_MS
    return frames[:count]


def _timed(frames: list[bytes], setup: Callable[[], Callable[[bytes], object]]) -> float:
    """Seconds for one pass of ``frames`` through a fresh pipeline (GC on, as in the daemon)."""
    step = setup()
    for raw in frames[:1000]:  # warm caches (stream registry, ticker map)
        step(raw)
    step = setup()
    gc.collect()
    started = time.perf_counter()
    for raw in frames:
        step(raw)
    return time.perf_counter() - started


def _parse_only() -> Callable[[bytes], object]:
    return parse_kline_frame


def _through_aggregator(*, tracker: bool, read_features: bool) -> Callable[[bytes], object]:
    bus = EventBus()
    features = FeatureTracker()
    aggregator = MultiTFAggregator(bus, observers=[features] if tracker else [])
    bus.subscribe(Topic.MARKET_TICK, aggregator.on_tick, name="aggregator")
    publish = bus.publish

    def step(raw: bytes) -> object:
        tick = parse_kline_frame(raw)
        publish(tick)
        if read_features:
            return features.features(tick.ticker)
        return tick

    return step


def main() -> None:
    frames = make_frames(FRAMES)
    stages: list[tuple[str, Callable[[], Callable[[bytes], object]]]] = [
        ("parse", _parse_only),
        ("parse+bus+aggregator", lambda: _through_aggregator(tracker=False, read_features=False)),
        ("+feature tracker", lambda: _through_aggregator(tracker=True, read_features=False)),
        ("+features() per tick", lambda: _through_aggregator(tracker=True, read_features=True)),
    ]
    print(f"tick path: {len(frames):,} frames, {len(TICKERS)} tickers x {len(TIMEFRAMES)} tf")
    for name, setup in stages:
        best = min(_timed(frames, setup) for _ in range(3))
        per_tick_us = best / len(frames) * 1e6
        print(f"  {name:<24} {per_tick_us:6.2f} us/tick  {len(frames) / best:>10,.0f} ticks/s")


if __name__ == "__main__":
    main()
