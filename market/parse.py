"""Binance websocket frames -> typed messages.

One function per question the listener asks of a frame:

- ``parse_frame(raw)``: what is this frame? A ``MarketTick`` (kline), a ``ServerShutdown`` notice or
  a tuple of ``MarkPrice`` updates; anything else raises ``FrameRejected(NOT_KLINE)``.
- ``parse_kline_frame(raw)``: the hot path, kline frames only, straight to a ``MarketTick``.
- ``decode_kline(raw)``: any Binance kline, for every Binance interval and contract kind, as a
  ``BinanceKline`` (``MarketTick`` only carries the timeframes vigil trades on).

Frames arrive combined-stream wrapped (``{"stream": ..., "data": {...}}``) or raw (``/ws`` mode);
both are accepted. A frame that is not exactly what Binance sends raises ``FrameRejected`` with a
reason the listener counts; nothing here logs, so a flood of bad frames costs no I/O.
Mark prices are parsed in ``market.mark_price``; what both share (rejection reasons, envelopes,
numbers, symbols, stream names) is ``market.wire``.
"""

from __future__ import annotations

import math
import re
from typing import Any, Final, NamedTuple

from core.events import MarketTick
from market.mark_price import MarkPrice, parse_mark_prices
from market.timeframes import TIMEFRAME_MS
from market.wire import (
    BINANCE_INTERVAL_MS,
    FrameRejected,
    RejectReason,
    WireMessage,
    decode,
    kline_stream_name,
    numbers,
    payload_of,
    unified_ticker,
)


class ServerShutdown(WireMessage):
    """Binance is about to close the connection: reconnect now rather than at the cut."""

    event_time_ms: int | None


class BinanceKline(WireMessage):
    """A kline as Binance sends it, for any interval; ``close_time_ms`` is Binance's ``T``."""

    ticker: str  # unified, see unified_ticker
    symbol: str  # Binance's, e.g. "BTCUSDT", "BTCUSD_PERP"
    interval: str
    open_time_ms: int
    close_time_ms: int
    open: float
    high: float
    low: float
    close: float
    volume: float
    closed: bool
    event_time_ms: int


def parse_frame(raw: bytes | str) -> MarketTick | ServerShutdown | tuple[MarkPrice, ...]:
    """Classify and parse one frame; other frame kinds raise ``FrameRejected(NOT_KLINE)``."""
    message = decode(raw)
    tick = _fast_tick(message)
    if tick is not None:
        return tick
    stream, payload = payload_of(message)
    if type(payload) is list:
        return parse_mark_prices(payload)
    if type(payload) is not dict:
        raise FrameRejected(RejectReason.MALFORMED, "payload is neither an object nor a list")
    kind = payload.get("e")
    if kind == "kline":
        return _tick(stream, payload)
    if kind == "serverShutdown":
        return _server_shutdown(payload)
    if kind == "markPriceUpdate":
        return parse_mark_prices(payload)
    raise FrameRejected(RejectReason.NOT_KLINE, f"event {kind!r}")


def parse_kline_frame(raw: bytes | str) -> MarketTick:
    """A kline frame of one of vigil's timeframes as a ``MarketTick`` (the hot path)."""
    message = decode(raw)
    tick = _fast_tick(message)
    if tick is not None:
        return tick
    stream, payload = _kline_payload(message)
    return _tick(stream, payload)


class _StreamInfo(NamedTuple):
    symbol: str
    interval: str
    ticker: str
    step_ms: int


#: combined-stream name -> what a kline on it must say; filled as streams are seen
_KLINE_STREAMS: dict[str, _StreamInfo] = {}
_MAKE_TICK = MarketTick.__pydantic_validator__.validate_python  # skips __init__'s kwargs hop


def _fast_tick(message: dict[str, Any]) -> MarketTick | None:
    """The tick of a well-formed combined-stream kline frame, else None (the careful path decides).

    Accepts only frames every check of ``_kline_fields`` and ``_tick`` would pass, with fewer calls
    and lookups; whenever anything is off it steps aside so the careful path names the reason.
    """
    try:
        info = _KLINE_STREAMS[message["stream"]]
        data = message["data"]
        k = data["k"]
        if data["e"] != "kline" or data["s"] != info.symbol or k["i"] != info.interval:
            return None
        if k.get("s", info.symbol) != info.symbol:
            return None
        t, close_t, event_t, closed = k["t"], k["T"], data["E"], k["x"]
        if not (
            type(t) is int
            and type(close_t) is int
            and type(event_t) is int
            and type(closed) is bool
            and t % info.step_ms == 0
            and close_t == t + info.step_ms - 1
        ):
            return None
        raw_o, raw_h, raw_l, raw_c, raw_v = k["o"], k["h"], k["l"], k["c"], k["v"]
        # one match for the five: each an unsigned decimal as Binance writes it (a str, or a
        # JSON number that formats as one: what the careful path takes too); a bool, None, a list
        # or a looser string float() would read (" 105 ", "1e5", fullwidth digits) steps aside
        if _FIVE_DECIMALS(f"{raw_o},{raw_h},{raw_l},{raw_c},{raw_v}") is None:
            return None
        o, h, lo, c, v = float(raw_o), float(raw_h), float(raw_l), float(raw_c), float(raw_v)
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    # NaN fails every comparison, and inf fails h < _INF, so these also reject non-finite values
    if not (0.0 < lo <= o <= h < _INF and lo <= c <= h and 0.0 <= v < _INF):
        return None
    return _MAKE_TICK(  # type: ignore[no-any-return]
        {
            "ticker": info.ticker,
            "timeframe": info.interval,
            "open_time_ms": t,
            "close_time_ms": close_t,
            "open": o,
            "high": h,
            "low": lo,
            "close": c,
            "volume": v,
            "closed": closed,
            "event_time_ms": event_t,
        }
    )


_INF: Final = math.inf
_FIVE_DECIMALS: Final = re.compile(
    r"(?:[0-9]++(?:\.[0-9]++)?+,){4}[0-9]++(?:\.[0-9]++)?+"
).fullmatch


def decode_kline(raw: bytes | str) -> BinanceKline:
    """Any Binance kline frame (every interval and contract kind) as a ``BinanceKline``."""
    stream, payload = _kline_payload(decode(raw))
    fields = _kline_fields(stream, payload)
    symbol, interval, t, close_t, o, h, lo, c, v, closed, event_t = fields
    return BinanceKline(
        ticker=unified_ticker(symbol),
        symbol=symbol,
        interval=interval,
        open_time_ms=t,
        close_time_ms=close_t,
        open=o,
        high=h,
        low=lo,
        close=c,
        volume=v,
        closed=closed,
        event_time_ms=event_t,
    )


def _kline_payload(message: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    stream, payload = payload_of(message)
    if type(payload) is not dict and type(payload) is not list:
        raise FrameRejected(RejectReason.MALFORMED, "payload is neither an object nor a list")
    if type(payload) is not dict or payload.get("e") != "kline":
        raise FrameRejected(RejectReason.NOT_KLINE, "not a kline event")
    return stream, payload


def _tick(stream: str | None, payload: dict[str, Any]) -> MarketTick:
    symbol, interval, t, close_t, o, h, lo, c, v, closed, event_t = _kline_fields(stream, payload)
    step = TIMEFRAME_MS.get(interval)
    if step is None:
        raise FrameRejected(
            RejectReason.UNKNOWN_INTERVAL,
            f"{interval!r} is a Binance interval but not a vigil timeframe {sorted(TIMEFRAME_MS)}",
        )
    if t % step:
        raise FrameRejected(RejectReason.INCONSISTENT, f"open time {t} not aligned to {interval}")
    ticker = unified_ticker(symbol)
    if stream is not None and stream not in _KLINE_STREAMS and len(_KLINE_STREAMS) < 10_000:
        _KLINE_STREAMS[stream] = _StreamInfo(symbol, interval, ticker, step)
    return MarketTick(
        ticker=ticker,
        timeframe=interval,
        open_time_ms=t,
        close_time_ms=close_t,
        open=o,
        high=h,
        low=lo,
        close=c,
        volume=v,
        closed=closed,
        event_time_ms=event_t,
    )


_KlineFields = tuple[str, str, int, int, float, float, float, float, float, bool, int]


def _kline_fields(stream: str | None, payload: dict[str, Any]) -> _KlineFields:
    """Validated kline values; the one place every kline frame is checked."""
    try:
        k = payload["k"]
        symbol, interval = payload["s"], k["i"]
        event_t, t, close_t, closed = payload["E"], k["t"], k["T"], k["x"]
        raw_prices = (k["o"], k["h"], k["l"], k["c"], k["v"])
        k_symbol = k.get("s", symbol)
    except (KeyError, TypeError) as exc:
        raise FrameRejected(RejectReason.MALFORMED, f"missing kline field {exc}") from None
    if not (
        type(symbol) is str
        and type(interval) is str
        and type(event_t) is int
        and type(t) is int
        and type(close_t) is int
        and type(closed) is bool
    ):
        raise FrameRejected(RejectReason.MALFORMED, "kline field of the wrong type")
    o, h, lo, c, v = numbers(raw_prices)
    step = BINANCE_INTERVAL_MS.get(interval, 0)
    if step == 0:
        raise FrameRejected(RejectReason.UNKNOWN_INTERVAL, f"interval {interval!r}")
    if not (math.isfinite(o) and math.isfinite(h) and math.isfinite(lo) and math.isfinite(c)):
        raise FrameRejected(RejectReason.NON_FINITE, "price is NaN or infinite")
    if not math.isfinite(v):
        raise FrameRejected(RejectReason.NON_FINITE, "volume is NaN or infinite")
    if o <= 0.0 or h <= 0.0 or lo <= 0.0 or c <= 0.0:
        raise FrameRejected(RejectReason.NON_POSITIVE_PRICE, f"o={o} h={h} l={lo} c={c}")
    if v < 0.0 or math.copysign(1.0, v) < 0.0:  # "-0" too: no volume is ever signed
        raise FrameRejected(RejectReason.NEGATIVE_VOLUME, f"v={v}")
    if not (lo <= o <= h and lo <= c <= h):
        raise FrameRejected(RejectReason.INCONSISTENT, f"o={o} h={h} l={lo} c={c}")
    if close_t < t or (step is not None and close_t != t + step - 1):
        raise FrameRejected(RejectReason.INCONSISTENT, f"t={t} T={close_t} for {interval}")
    if k_symbol != symbol:
        raise FrameRejected(RejectReason.INCONSISTENT, f"symbols {symbol!r} and {k_symbol!r}")
    if stream is not None and stream != _stream_name(symbol, interval):
        raise FrameRejected(RejectReason.INCONSISTENT, f"stream {stream!r} for {symbol} {interval}")
    return symbol, interval, t, close_t, o, h, lo, c, v, closed, event_t


_STREAMS: dict[tuple[str, str], str] = {}


def _stream_name(symbol: str, interval: str) -> str:
    key = (symbol, interval)
    name = _STREAMS.get(key)
    if name is None:
        name = kline_stream_name(symbol, interval)
        if len(_STREAMS) < 10_000:
            _STREAMS[key] = name
    return name


def _server_shutdown(payload: dict[str, Any]) -> ServerShutdown:
    event_t = payload.get("E")
    if event_t is not None and type(event_t) is not int:
        raise FrameRejected(RejectReason.MALFORMED, "serverShutdown event time is not an integer")
    return ServerShutdown(event_time_ms=event_t)


__all__ = ["BinanceKline", "ServerShutdown", "decode_kline", "parse_frame", "parse_kline_frame"]
