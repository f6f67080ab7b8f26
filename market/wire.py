"""Binance wire basics shared by the frame parsers (``market.parse`` for klines and shutdown
notices, ``market.mark_price`` for mark prices): why a frame is rejected, JSON decoding, the
combined / raw / websocket-API envelopes, Binance's numbers, intervals, symbols and stream names.

Nothing here logs: a flood of bad frames costs no I/O (the listener counts them by reason).
"""

from __future__ import annotations

import enum
import math
import re
from typing import Any, Final

import orjson
from pydantic import BaseModel, ConfigDict

from core.errors import VigilError


class RejectReason(enum.StrEnum):
    """Why a frame was dropped (the listener counts frames by these)."""

    MALFORMED = "malformed"  # not JSON, missing keys, wrong types
    NOT_KLINE = "not_kline"  # a valid frame of another kind
    NON_FINITE = "non_finite"  # NaN or infinity in a number
    NON_POSITIVE_PRICE = "non_positive_price"  # a price <= 0
    NEGATIVE_VOLUME = "negative_volume"
    INCONSISTENT = "inconsistent"  # high < low, close outside [low, high], times disagree, ...
    UNKNOWN_INTERVAL = "unknown_interval"  # not a Binance interval, or not one vigil tracks
    UNKNOWN_SYMBOL = "unknown_symbol"  # a symbol that maps to no unified ticker
    # checked against the clock and the market by ``market.guard.FrameGuard``
    FUTURE_TIME = "future_time"  # E or t beyond the clock plus the allowed skew
    STALE_TIME = "stale_time"  # E older than the allowed frame age
    EARLY_CLOSE = "early_close"  # x=true before the candle's close time
    IMPLAUSIBLE_PRICE = "implausible_price"  # over the cap, or far from the last good price
    IMPLAUSIBLE_VOLUME = "implausible_volume"  # over the cap


class FrameRejected(VigilError):
    """The frame is unusable: drop it and count it by ``reason``; never retry it."""

    def __init__(self, reason: RejectReason, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else str(reason))
        self.reason = reason
        self.detail = detail


class WireMessage(BaseModel):
    """A parsed frame: frozen, nothing but its fields."""

    model_config = ConfigDict(frozen=True, extra="forbid")


_MINUTE_MS: Final = 60_000
#: every Binance kline interval; "1M" (calendar month) has no fixed length
BINANCE_INTERVAL_MS: Final[dict[str, int | None]] = {
    "1s": 1_000,
    "1m": _MINUTE_MS,
    "3m": 3 * _MINUTE_MS,
    "5m": 5 * _MINUTE_MS,
    "15m": 15 * _MINUTE_MS,
    "30m": 30 * _MINUTE_MS,
    "1h": 60 * _MINUTE_MS,
    "2h": 120 * _MINUTE_MS,
    "4h": 240 * _MINUTE_MS,
    "6h": 360 * _MINUTE_MS,
    "8h": 480 * _MINUTE_MS,
    "12h": 720 * _MINUTE_MS,
    "1d": 1_440 * _MINUTE_MS,
    "3d": 3 * 1_440 * _MINUTE_MS,
    "1w": 7 * 1_440 * _MINUTE_MS,
    "1M": None,
}
_QUOTES: Final = ("USDT", "USDC", "FDUSD", "BUSD")  # USDⓈ-M margin assets, longest match first
_TICKERS: dict[str, str] = {}  # Binance symbol -> unified ticker, filled as symbols are seen


def unified_ticker(symbol: str) -> str:
    """Binance symbol -> ccxt-style unified ticker; USDⓈ-M perpetuals use vigil's short form.

    ``BTCUSDT`` -> ``BTC/USDT``; ``BTCUSDT_220624`` -> ``BTC/USDT:USDT-220624``;
    ``BTCUSD_PERP`` -> ``BTC/USD:BTC``; ``BTCUSD_220624`` -> ``BTC/USD:BTC-220624``.
    """
    cached = _TICKERS.get(symbol)
    if cached is not None:
        return cached
    ticker = _unify(symbol)
    if len(_TICKERS) < 10_000:  # bounded: a hostile stream cannot grow it forever
        _TICKERS[symbol] = ticker
    return ticker


def _unify(symbol: str) -> str:
    pair, _, suffix = symbol.upper().partition("_")
    if pair.endswith("USD") and suffix:  # coin-margined: settled in the base asset
        base = pair[:-3]
        if base.isalnum() and base:
            return f"{base}/USD:{base}" if suffix == "PERP" else f"{base}/USD:{base}-{suffix}"
    for quote in _QUOTES:
        base = pair[: -len(quote)]
        if pair.endswith(quote) and base.isalnum() and base:
            if not suffix:
                return f"{base}/{quote}"
            if suffix.isdigit():
                return f"{base}/{quote}:{quote}-{suffix}"
    raise FrameRejected(RejectReason.UNKNOWN_SYMBOL, f"cannot unify symbol {symbol!r}")


def decode(raw: bytes | str) -> dict[str, Any]:
    """The frame's JSON object (orjson); anything else is MALFORMED."""
    try:
        message = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise FrameRejected(RejectReason.MALFORMED, f"not JSON: {exc}") from None
    if type(message) is not dict:
        raise FrameRejected(RejectReason.MALFORMED, "frame is not a JSON object")
    return message


def payload_of(message: dict[str, Any]) -> tuple[str | None, Any]:
    """(stream name, payload) of a combined-stream, raw-stream or websocket-API event frame."""
    if "data" in message:
        stream = message.get("stream")
        if stream is not None and type(stream) is not str:
            raise FrameRejected(RejectReason.MALFORMED, "stream name is not a string")
        return stream, message["data"]
    if "event" in message:  # websocket API wrapper, used for serverShutdown
        return None, message["event"]
    return None, message


def kline_stream_name(symbol: str, interval: str) -> str:
    """Binance's stream name for a symbol's klines: lower-case symbol, interval as is."""
    return f"{symbol.lower()}@kline_{interval}"


def numbers(raw: tuple[Any, ...]) -> tuple[float, float, float, float, float]:
    """Binance sends decimals as strings; numbers are accepted too, booleans and the rest are not."""
    try:
        o, h, lo, c, v = (number(x) for x in raw)
    except (TypeError, ValueError) as exc:
        raise FrameRejected(RejectReason.MALFORMED, f"not a number: {exc}") from None
    return o, h, lo, c, v


#: a decimal as Binance writes one: ASCII digits, an optional fraction, an optional leading minus
#: (whether a field may be negative is the parser's check, which names it: non_positive_price...)
_DECIMAL: Final = re.compile(r"-?[0-9]++(?:\.[0-9]++)?+").fullmatch


def number(value: Any) -> float:
    """A JSON number, or a string holding a decimal as Binance writes it (``_DECIMAL``).

    ``float()`` alone also read what Binance never sends: " 105 ", fullwidth digits, "1_000",
    "1e5", "+105", ".5". Those raise ``ValueError``. What ``float()`` reads as NaN or infinity
    ("nan", "Infinity", "1e400") is returned as such, for the caller's ``non_finite`` check.
    """
    kind = type(value)
    if kind is str:
        if _DECIMAL(value) is not None:
            return float(value)
        loose = float(value)  # ValueError: not a number at all
        if math.isfinite(loose):
            raise ValueError(f"{value!r} is not a decimal as Binance writes one")
        return loose
    if kind is float or kind is int:
        return float(value)
    raise TypeError(f"{kind.__name__} {value!r}")


__all__ = [
    "BINANCE_INTERVAL_MS",
    "FrameRejected",
    "RejectReason",
    "WireMessage",
    "decode",
    "kline_stream_name",
    "number",
    "numbers",
    "payload_of",
    "unified_ticker",
]
