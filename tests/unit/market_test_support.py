"""Helpers shared by the market unit tests: Binance-shaped frames, ticks and candle series."""

from __future__ import annotations

from typing import Any

import orjson

from core.events import Candle, MarketTick, Timeframe
from market.timeframes import TIMEFRAME_MS, to_binance_symbol


def kline_payload(
    *,
    ticker: str = "BTC/USDT",
    interval: str = "15m",
    open_ms: int = 1_740_787_200_000,  # 2025-03-01 00:00 UTC
    event_ms: int | None = None,
    o: Any = "100.0",
    h: Any = "110.0",
    low: Any = "90.0",
    c: Any = "105.0",
    v: Any = "12.5",
    closed: bool = False,
) -> dict[str, Any]:
    """Binance's kline event (strings for decimals, like the real thing)."""
    symbol = to_binance_symbol(ticker)
    step = TIMEFRAME_MS.get(interval, 60_000)
    return {
        "e": "kline",
        "E": open_ms + 1_000 if event_ms is None else event_ms,
        "s": symbol,
        "k": {
            "t": open_ms,
            "T": open_ms + step - 1,
            "s": symbol,
            "i": interval,
            "f": 100,
            "L": 200,
            "o": o,
            "c": c,
            "h": h,
            "l": low,
            "v": v,
            "n": 101,
            "x": closed,
            "q": "1.0",
            "V": "0.5",
            "Q": "0.5",
            "B": "0",
        },
    }


def combined(payload: dict[str, Any]) -> dict[str, Any]:
    """Wrap a payload the way a combined stream does."""
    stream = f"{payload['s'].lower()}@kline_{payload['k']['i']}"
    return {"stream": stream, "data": payload}


def kline_frame(**kwargs: Any) -> bytes:
    """A combined-stream kline frame, serialised."""
    return orjson.dumps(combined(kline_payload(**kwargs)))


def make_tick(
    *,
    ticker: str = "BTC/USDT",
    timeframe: Timeframe = "15m",
    open_ms: int = 1_740_787_200_000,
    event_ms: int | None = None,
    o: float = 100.0,
    h: float = 110.0,
    low: float = 90.0,
    c: float = 105.0,
    v: float = 10.0,
    closed: bool = False,
) -> MarketTick:
    step = TIMEFRAME_MS[timeframe]
    return MarketTick(
        ticker=ticker,
        timeframe=timeframe,
        open_time_ms=open_ms,
        close_time_ms=open_ms + step - 1,
        open=o,
        high=h,
        low=low,
        close=c,
        volume=v,
        closed=closed,
        event_time_ms=(open_ms + step - 1 if closed else open_ms + 1_000)
        if event_ms is None
        else event_ms,
    )


def close_tick(
    candle: Candle, *, ticker: str = "BTC/USDT", timeframe: Timeframe = "15m"
) -> MarketTick:
    return make_tick(
        ticker=ticker,
        timeframe=timeframe,
        open_ms=candle.open_time_ms,
        o=candle.open,
        h=candle.high,
        low=candle.low,
        c=candle.close,
        v=candle.volume,
        closed=True,
    )


def candle_series(
    closes: list[float],
    *,
    start_ms: int = 1_740_787_200_000,
    step_ms: int = TIMEFRAME_MS["15m"],
    volumes: list[float] | None = None,
) -> list[Candle]:
    """Consecutive candles with the given closes (open = previous close)."""
    out = []
    previous = closes[0]
    for i, close in enumerate(closes):
        out.append(
            Candle(
                open_time_ms=start_ms + i * step_ms,
                open=previous,
                high=max(previous, close),
                low=min(previous, close),
                close=close,
                volume=volumes[i] if volumes is not None else 10.0,
            )
        )
        previous = close
    return out
