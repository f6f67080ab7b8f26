"""A close's ``Candle`` and ``CandleClosed``, made without validation when validation would
hand the same objects back (138 k closes a replayed year)."""

from __future__ import annotations

from typing import get_args

from core.events import Candle, CandleClosed, MarketTick
from core.unvalidated import require_plain, unvalidated

_CANDLE_ORDER = ("open_time_ms", "open", "high", "low", "close", "volume")
_CLOSED_ORDER = ("ticker", "timeframe", "candle")
require_plain(Candle, frozenset(_CANDLE_ORDER))
require_plain(CandleClosed, frozenset(_CLOSED_ORDER))
_TIMEFRAMES = frozenset(get_args(CandleClosed.model_fields["timeframe"].annotation))
#: ``set()`` of each model's fields (each made model gets a copy)
_CANDLE_NAMES = set(_CANDLE_ORDER)
_CLOSED_NAMES = set(_CLOSED_ORDER)


def candle_of(tick: MarketTick) -> Candle:
    """The tick's candle. Made without validation when its values are of their fields' types
    exactly (a tick's are, validated or made by ``sim.tick_rows``): validating them would hand
    the same objects back. Anything else validated as before."""
    open_ms, o, h, low, c, v = (
        tick.open_time_ms, tick.open, tick.high, tick.low, tick.close, tick.volume,
    )  # fmt: skip
    fields = {"open_time_ms": open_ms, "open": o, "high": h, "low": low, "close": c, "volume": v}
    if (
        type(open_ms) is int
        and type(o) is float
        and type(h) is float
        and type(low) is float
        and type(c) is float
        and type(v) is float
    ):
        return unvalidated(Candle, fields, _CANDLE_NAMES)
    return Candle(**fields)


def closed_event(tick: MarketTick, candle: Candle) -> CandleClosed:
    """The close's event, made without validation as ``candle_of`` makes the candle: an exact
    str ticker and a timeframe of the field's (validation keeps a ``Candle`` as it is)."""
    ticker: object = tick.ticker  # a model made without validation may hold anything
    timeframe: object = tick.timeframe
    fields = {"ticker": ticker, "timeframe": timeframe, "candle": candle}
    if type(ticker) is str and type(timeframe) is str and timeframe in _TIMEFRAMES:
        return unvalidated(CandleClosed, fields, _CLOSED_NAMES)
    return CandleClosed(**fields)
