"""The rows ``RecordedTicks`` publishes: one kline update as plain numbers, and its ``MarketTick``.

A row is what the listener reads from one simulator frame: the candle's open and close times, its
OHLCV written with the simulator's formatting (``sim.ws_streams.format_ohlcv``) and read back with
``float``, and whether it closed. Ticker, timeframe and event time are the stream's and the
instant's, so a row carries none of them. Replay computes rows either in its own process or ahead
in a worker (``sim.tick_ahead``), with these same functions, so both give the same floats.

Many instants' rows travel as one flat list of ``ROW_WIDTH`` values per stream (``Rows``): ints,
floats, bools and None are not tracked by the garbage collector, where a tuple per row made the
replay's process run about twice as many young-generation collections.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from core.events import MarketTick
from sim.feed import KlineState, SimFeed
from sim.ws_streams import KlineFormat, format_ohlcv

#: (open_time_ms, close_time_ms, open, high, low, close, volume, closed)
Row = tuple[int, int, float, float, float, float, float, bool]
ROW_WIDTH: Final = 8
#: rows laid end to end, ``ROW_WIDTH`` values each; a silent stream's are all None
Rows = list[Any]
_SILENT: Final = (None,) * ROW_WIDTH
#: one stream's coordinates in a feed: (ticker, timeframe, how its numbers are written)
StreamKey = tuple[str, str, KlineFormat]

_MAKE_TICK: Final = MarketTick.__pydantic_validator__.validate_python  # skips __init__'s kwargs hop


def kline_row(state: KlineState, fmt: KlineFormat) -> Row:
    """The kline's numbers as the listener reads them from the simulator's frame."""
    o, h, low, c, v = format_ohlcv(state, fmt)
    return (
        state.open_time_ms,
        state.close_time_ms,
        float(o),
        float(h),
        float(low),
        float(c),
        float(v),
        state.closed,
    )


def instant_rows(
    feed: SimFeed, streams: Sequence[StreamKey], first_ms: int, count: int, interval_ms: int
) -> Rows:
    """Every stream's row at ``count`` instants from ``first_ms``, ``interval_ms`` apart: instant
    major, then the streams in order; Nones where the stream is silent (a hole, or outside the
    recording)."""
    kline_state = feed.kline_state
    rows: Rows = []
    extend = rows.extend
    for event_ms in range(first_ms, first_ms + count * interval_ms, interval_ms):
        for ticker, timeframe, fmt in streams:
            state = kline_state(ticker, timeframe, event_ms)
            extend(_SILENT if state is None else kline_row(state, fmt))
    return rows


def make_tick(ticker: str, timeframe: str, row: Sequence[Any], event_ms: int) -> MarketTick:
    """The tick of one row (a ``Row``, or ``ROW_WIDTH`` values of ``Rows``)."""
    open_ms, close_ms, o, h, low, c, v, closed = row
    return _MAKE_TICK(  # type: ignore[no-any-return]
        {
            "ticker": ticker,
            "timeframe": timeframe,
            "open_time_ms": open_ms,
            "close_time_ms": close_ms,
            "open": o,
            "high": h,
            "low": low,
            "close": c,
            "volume": v,
            "closed": closed,
            "event_time_ms": event_ms,
        }
    )


__all__ = ["ROW_WIDTH", "Row", "Rows", "StreamKey", "instant_rows", "kline_row", "make_tick"]
