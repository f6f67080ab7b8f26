"""The simulator's stream vocabulary: stream names and URL paths parsed, Binance's kline and
markPrice payloads built, and which updates a connection owes between two instants.

Pure functions of their arguments (no sockets): ``sim.ws_server`` serves them, replay's
``sim.recorded_ticks`` formats the same numbers, and the protocol tests check them directly.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple
from urllib.parse import parse_qs, urlsplit

from market.timeframes import TIMEFRAME_MS, from_binance_symbol, to_binance_symbol
from sim.feed import KlineState, SimFeed, closing_updates

KLINE_TIMEFRAMES = ("5m", "15m", "1h", "4h")
MARK_PRICE_PERIOD_MS = {"": 3000, "@1s": 1000}


class UnknownStreamError(ValueError):
    """A stream name this simulator does not serve (the client asked for something wrong)."""


class StreamSpec(NamedTuple):
    name: str  # canonical (lowercase symbol), e.g. "btcusdt@kline_15m"
    ticker: str  # "BTC/USDT"
    symbol: str  # "BTCUSDT"
    timeframe: str | None  # kline interval; None for markPrice
    period_ms: int  # how often this stream pushes, in simulated ms


def parse_stream(name: str, tickers: Iterable[str], update_interval_ms: int) -> StreamSpec:
    """``btcusdt@kline_15m`` -> StreamSpec. Raises UnknownStreamError for anything not served."""
    symbol_part, sep, kind = name.partition("@")
    if not sep:
        raise UnknownStreamError(f"invalid stream {name!r}: expected <symbol>@<type>")
    try:
        ticker = from_binance_symbol(symbol_part)
    except ValueError:
        raise UnknownStreamError(f"invalid stream {name!r}: unknown symbol") from None
    if ticker not in set(tickers):
        raise UnknownStreamError(f"invalid stream {name!r}: symbol not served by the simulator")
    symbol = to_binance_symbol(ticker)
    if kind.startswith("kline_") and kind[len("kline_") :] in KLINE_TIMEFRAMES:
        timeframe = kind[len("kline_") :]
        return StreamSpec(f"{symbol.lower()}@{kind}", ticker, symbol, timeframe, update_interval_ms)
    if kind.startswith("markPrice") and kind[len("markPrice") :] in MARK_PRICE_PERIOD_MS:
        period_ms = MARK_PRICE_PERIOD_MS[kind[len("markPrice") :]]
        return StreamSpec(f"{symbol.lower()}@{kind}", ticker, symbol, None, period_ms)
    raise UnknownStreamError(
        f"invalid stream {name!r}: served types are kline_{{{','.join(KLINE_TIMEFRAMES)}}}, "
        "markPrice, markPrice@1s"
    )


def parse_request_path(path: str) -> tuple[bool, list[str]] | None:
    """(combined?, stream names) for a Binance stream URL path, None for an unknown path."""
    parts = urlsplit(path)
    route = parts.path.rstrip("/")
    for prefix in ("", "/market", "/public"):
        if route == f"{prefix}/stream":
            names = parse_qs(parts.query).get("streams", [""])[0]
            return True, [name for name in names.split("/") if name]
        if route == f"{prefix}/ws":
            return False, []
        if route.startswith(f"{prefix}/ws/"):
            return False, [name for name in route[len(prefix) + 4 :].split("/") if name]
    return None


def kline_payload(
    spec: StreamSpec, state: KlineState, event_ms: int, fmt: KlineFormat
) -> dict[str, Any]:
    """Binance's kline event. The recording has no trades: n, q, V, Q, f, L are zero values."""
    o, h, low, c, v = format_ohlcv(state, fmt)
    return {
        "e": "kline",
        "E": event_ms,
        "s": spec.symbol,
        "k": {
            "t": state.open_time_ms,
            "T": state.close_time_ms,
            "s": spec.symbol,
            "i": state.timeframe,
            "f": 0,
            "L": 0,
            "o": o,
            "c": c,
            "h": h,
            "l": low,
            "v": v,
            "n": 0,
            "x": state.closed,
            "q": "0",
            "V": "0",
            "Q": "0",
            "B": "0",
        },
    }


def mark_price_payload(
    spec: StreamSpec,
    price: float,
    funding_rate: float,
    next_funding_ms: int,
    event_ms: int,
    fmt: KlineFormat,
) -> dict[str, Any]:
    """Binance's markPriceUpdate. Mark = last kline price.

    The index price ``i`` and estimated settle price ``P`` are not recorded, so they are left out
    (never sent as zeros), as ``rest_payloads.premium_index_row`` leaves them out of premiumIndex.
    """
    return {
        "e": "markPriceUpdate",
        "E": event_ms,
        "s": spec.symbol,
        "p": fmt.price % price,
        "r": f"{funding_rate:.8f}",
        "T": next_funding_ms,
    }


class KlineFormat(NamedTuple):
    """How a symbol's numbers are written on the wire (replay rounds through the same strings)."""

    price: str  # printf format with the symbol's recorded price decimals
    quantity: str

    @classmethod
    def of(cls, feed: SimFeed, ticker: str) -> KlineFormat:
        return cls(f"%.{feed.price_decimals(ticker)}f", f"%.{feed.quantity_decimals(ticker)}f")


def format_ohlcv(state: KlineState, fmt: KlineFormat) -> tuple[str, str, str, str, str]:
    """(open, high, low, close, volume) as the kline frame's strings."""
    price = fmt.price
    return (
        price % state.open,
        price % state.high,
        price % state.low,
        price % state.close,
        fmt.quantity % state.volume,
    )


class Subscription(NamedTuple):
    spec: StreamSpec
    since_ms: int  # frames due at or before this instant are not sent (subscribed later)


def due_instants(
    subscriptions: Sequence[Subscription], last_ms: int, now_ms: int
) -> list[tuple[int, int]]:
    """(event ms, subscription index) due in (last_ms, now_ms], sorted by time then stream.

    Per stream: its latest due update, plus, for klines, every candle-closing update before it,
    so falling behind skips intermediate updates but never a candle's close.
    """
    due: list[tuple[int, int]] = []
    for index, (spec, since_ms) in enumerate(subscriptions):
        period = spec.period_ms
        after_ms = max(last_ms, since_ms)
        latest = now_ms - now_ms % period
        if latest <= after_ms:
            continue
        if spec.timeframe is not None:
            tf_ms = TIMEFRAME_MS[spec.timeframe]
            due.extend(
                (closing, index) for closing in closing_updates(after_ms, latest, tf_ms, period)
            )
        due.append((latest, index))
    due.sort()
    return due


__all__ = [
    "KLINE_TIMEFRAMES",
    "MARK_PRICE_PERIOD_MS",
    "KlineFormat",
    "StreamSpec",
    "Subscription",
    "UnknownStreamError",
    "due_instants",
    "format_ohlcv",
    "kline_payload",
    "mark_price_payload",
    "parse_request_path",
    "parse_stream",
]
