"""Timeframes and symbol names shared by the client, the simulator and replay."""

from __future__ import annotations

from typing import Final

TIMEFRAME_MS: Final[dict[str, int]] = {
    "5m": 300_000,
    "15m": 900_000,
    "1h": 3_600_000,
    "4h": 14_400_000,
}

QUOTE = "USDT"

#: base bars a replay can run on (the 15m / 1h / 4h candles are built from them)
BASE_INTERVAL_MS: Final[dict[str, int]] = {
    "1m": 60_000,
    "3m": 180_000,
    "5m": 300_000,
    "15m": 900_000,
}
#: the kline intervals a data dir may hold
RECORDED_INTERVALS: Final = (*BASE_INTERVAL_MS, "1h")


def timeframe_ms(timeframe: str) -> int:
    try:
        return TIMEFRAME_MS[timeframe]
    except KeyError:
        raise ValueError(
            f"unknown timeframe {timeframe!r}; known: {sorted(TIMEFRAME_MS)}"
        ) from None


def candle_open_ms(at_ms: int, timeframe: str) -> int:
    """Open time of the candle of ``timeframe`` containing ``at_ms`` (candles align to the epoch)."""
    step = timeframe_ms(timeframe)
    return at_ms - at_ms % step


def to_binance_symbol(ticker: str) -> str:
    """``BTC/USDT`` or ``BTC/USDT:USDT`` -> ``BTCUSDT``."""
    base, _, rest = ticker.partition("/")
    quote = rest.split(":", 1)[0]
    if not base or not quote:
        raise ValueError(f"not a BASE/QUOTE ticker: {ticker!r}")
    return f"{base}{quote}".upper()


def normalized_ticker(raw: str) -> str:
    """``BTC/USDT:USDT``, ``btc/usdt``, ``BTCUSDT`` -> ``BTC/USDT``; ``ValueError`` for anything
    else (the risk caps and the organisation's banned tickers read names so)."""
    if not raw.isascii():
        # before upper(): it makes U+017F (long s) an S: a model's long-s sol/usdt bought SOL/USDT
        raise ValueError(f"not a ticker: {raw!r} (a ticker is ASCII)")
    text = raw.strip().upper()
    if not text:
        raise ValueError("empty ticker")
    if "/" in text:
        base, _, quote = text.partition("/")
        quote = quote.split(":", 1)[0]
        if not base.isalnum() or not quote.isalnum():
            raise ValueError(f"not a ticker: {raw!r}")
        return f"{base}/{quote}"
    return from_binance_symbol(text)


def from_binance_symbol(symbol: str) -> str:
    """``BTCUSDT`` / ``btcusdt`` -> ``BTC/USDT`` (USDT-margined symbols only)."""
    upper = symbol.upper()
    # alphanumeric only: "BTC/USDT" passed here by mistake must not become "BTC//USDT"
    if not upper.endswith(QUOTE) or len(upper) <= len(QUOTE) or not upper.isalnum():
        raise ValueError(f"not a USDT-margined symbol: {symbol!r}")
    return f"{upper[: -len(QUOTE)]}/{QUOTE}"
