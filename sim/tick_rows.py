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

_FIELDS: Final = frozenset(MarketTick.model_fields)
_TIMEFRAMES: Final = frozenset(get_args(MarketTick.model_fields["timeframe"].annotation))
#: the keys ``make_tick`` fills
_TICK_KEYS: Final = frozenset(
    {
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
    }
)
_new = object.__new__
_set = object.__setattr__


def _check_tick_model() -> None:
    """``make_tick`` fills a ``MarketTick`` the way pydantic's own unpickling does, which is only
    the validated tick while the model is plain typed fields: fail at import if that changes."""
    decorators = MarketTick.__pydantic_decorators__
    hooks = (
        decorators.validators,
        decorators.field_validators,
        decorators.root_validators,
        decorators.model_validators,
        MarketTick.__private_attributes__,
    )
    if any(hooks) or MarketTick.__pydantic_post_init__ is not None:
        raise TypeError("MarketTick has validators or private state: make_tick must validate")
    if _FIELDS != _TICK_KEYS:
        raise TypeError(f"MarketTick's fields changed ({sorted(_FIELDS)}): update make_tick")


_check_tick_model()


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
    tick: MarketTick = _new(MarketTick)
    _set(
        tick,
        "__dict__",
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
    )
    _set(tick, "__pydantic_fields_set__", set(_FIELDS))
    _set(tick, "__pydantic_extra__", None)
    _set(tick, "__pydantic_private__", None)
    return tick


__all__ = ["ROW_WIDTH", "Row", "Rows", "StreamKey", "instant_rows", "kline_row", "make_tick"]
