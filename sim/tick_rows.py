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
from typing import Any, Final, get_args

from core.events import MarketTick
from core.unvalidated import require_plain, unvalidated
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

_TIMEFRAMES: Final = frozenset(get_args(MarketTick.model_fields["timeframe"].annotation))
#: the keys ``make_tick`` fills, in its order
_TICK_ORDER: Final = (
    "ticker",
    "timeframe",
    "open_time_ms",
    "close_time_ms",
    "open",
    "high",
    "low",
    "close",
    "volume",
    "closed",
    "event_time_ms",
)
require_plain(MarketTick, frozenset(_TICK_ORDER))
#: a tick's fields set (equal to ``set(fields)``; its iteration order may differ, and nothing
#: reads that order): each tick gets a copy
_TICK_NAMES: Final = set(_TICK_ORDER)


def kline_row(state: KlineState, fmt: KlineFormat) -> Row:
    """The kline's numbers as the listener reads them from the simulator's frame, each of the
    exact type its ``MarketTick`` field holds (``make_tick`` relies on it)."""
    o, h, low, c, v = format_ohlcv(state, fmt)
    return (
        int(state.open_time_ms),
        int(state.close_time_ms),
        float(o),
        float(h),
        float(low),
        float(c),
        float(v),
        bool(state.closed),
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
    """The tick of one row (a ``Row``, or ``ROW_WIDTH`` values of ``Rows``).

    Not validated field by field: a row's values already have their fields' exact types
    (``kline_row``), and validating int, float and bool values of those types hands them back
    unchanged, so the tick is set up as pydantic's unpickling sets one up (about half the cost,
    once per tick of a replay). Only the timeframe, the one field a type does not pin, is checked.
    """
    if timeframe not in _TIMEFRAMES:
        raise ValueError(f"not a MarketTick timeframe: {timeframe!r}")
    open_ms, close_ms, o, h, low, c, v, closed = row
    return unvalidated(
        MarketTick,
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
        },
        _TICK_NAMES,
    )


__all__ = ["ROW_WIDTH", "Row", "Rows", "StreamKey", "instant_rows", "kline_row", "make_tick"]
