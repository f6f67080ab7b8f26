"""The in-process tick path: parse -> bus -> aggregator -> features, in µs per tick and ticks/s.

Frames are pre-serialised Binance combined-stream kline frames (3 tickers x 15m/1h/4h, a push every
250 ms per stream, a random-walk price, closing frames at every boundary), so only the path itself
is timed. Stages are measured cumulatively on the same frames, each on a fresh pipeline:

1. parse only (``parse_kline_frame``)
2. + ``bus.publish`` to the aggregator (forming/closed candles, ``CandleClosed``/``MarketGap``)
3. + the FeatureTracker fed by the aggregator (incremental state per tick)
4. + ``tracker.features(ticker)`` on every tick (what the gate reads: builds ``TickFeatures``)

Then the daemon's whole path, each tick timed on its own (p50 / p95 / mean): the listener's
``on_frame`` (parse, ``FrameGuard`` against the clock, stream order) -> ``bus.publish`` ->
``CryptoRunner.handle_tick`` (aggregator -> features -> metric board -> gate.evaluate -> decision
request, counted here). The clock is set to each frame's event time outside the timed part. The
paper broker's price sink is left out (it has no resting order to fill here).
"""

from __future__ import annotations

import gc
import random
import statistics
import time
from collections.abc import Callable, Sequence

import orjson

from core.bus import EventBus
from core.events import Topic
from gate.conditions import build_metric_registry
from gate.gate import AdaptiveGate
from gate.metrics import MetricBoard
from market.aggregator import MultiTFAggregator
from market.features import FeatureTracker
from market.listener import MarketListener
from market.parse import parse_kline_frame
from market.timeframes import TIMEFRAME_MS, to_binance_symbol
from runner.crypto_runner import CryptoRunner

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


class _SetClock:
    """A clock the bench sets to each frame's event time (the guard checks frames against it)."""

    def __init__(self, now_ms: int) -> None:
        self.now = now_ms

    def now_ms(self) -> int:
        return self.now

    def monotonic_secs(self) -> float:
        return self.now / 1000.0

    async def sleep(self, secs: float) -> None:
        raise NotImplementedError("the bench never sleeps")


class _Requests:
    def __init__(self) -> None:
        self.count = 0

    def request(self, reasons: Sequence[str]) -> None:
        self.count += 1


def _daemon_path(clock: _SetClock) -> tuple[MarketListener, _Requests]:
    """The listener and the tick handler as ``runner.wiring`` connects them, without sockets."""
    bus = EventBus()
    features = FeatureTracker()
    aggregator = MultiTFAggregator(bus, observers=[features])
    registry = build_metric_registry(TICKERS)
    requests = _Requests()
    runner = CryptoRunner(
        bus,
        aggregator=aggregator,
        features=features,
        board=MetricBoard(registry),
        gate=AdaptiveGate(clock, registry=registry),
        decisions=requests,
    )
    bus.subscribe(Topic.MARKET_TICK, runner.handle_tick, name="tick_path")
    listener = MarketListener(clock, bus, base_url="ws://127.0.0.1:9", tickers=TICKERS)
    return listener, requests


def daemon_path_us(frames: list[bytes]) -> tuple[list[float], int, int]:
    """Per-tick microseconds through the whole path, the frames dropped and the requests made."""
    event_ms = [orjson.loads(raw)["data"]["E"] for raw in frames]
    clock = _SetClock(event_ms[0])
    listener, requests = _daemon_path(clock)
    on_frame, counter = listener.frames.on_frame, time.perf_counter_ns
    times: list[float] = []
    gc.collect()
    for raw, at_ms in zip(frames, event_ms, strict=True):
        clock.now = at_ms
        started = counter()
        on_frame(raw)
        times.append((counter() - started) / 1000.0)
    dropped = listener.rejections.total
    return times, dropped, requests.count


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
    times, dropped, requests = daemon_path_us(frames)
    times.sort()
    print(
        f"  daemon path (listener.frames.on_frame -> guard -> bus -> handle_tick -> gate): "
        f"p50 {statistics.median(times):.2f} us, p95 {times[int(len(times) * 0.95)]:.2f} us, "
        f"mean {statistics.fmean(times):.2f} us over {len(times):,} ticks "
        f"({dropped} dropped, {requests} decision requests)"
    )


if __name__ == "__main__":
    main()
