"""What surely traded between two kline pushes of one stream.

A kline push carries the candle's low and high SO FAR, which include trading from before the
previous push (and so possibly from before an order was placed). Filling a limit on them would fill
orders on trades that happened before the orders existed. ``TradedRangeTracker`` turns the pushes
of a stream into the range that traded since the previous push:

- the first push seen on a stream: only its close (nothing is known about what came before);
- a push of a newer candle: the whole candle (it all traded after the previous candle's push);
- a later push of the same candle: a new low (high) if the candle's low (high) moved, else only the
  close, the one price known to have traded in between;
- a push of an older candle: nothing (late or duplicated).
"""

from __future__ import annotations

from typing import NamedTuple

from core.events import MarketTick


class TradedRange(NamedTuple):
    price: float  # the last trade
    low: float | None  # None: nothing known below ``price``
    high: float | None
    at_ms: int


class TradedRangeTracker:
    """Per (ticker, timeframe) memory of the last push; see the module docstring."""

    def __init__(self) -> None:
        #: the last push of each stream (ticks are frozen: only its open time, low and high count)
        self._last: dict[tuple[str, str], MarketTick] = {}

    def observe(self, tick: MarketTick) -> TradedRange | None:
        key = (tick.ticker, tick.timeframe)
        previous = self._last.get(key)
        if previous is not None and tick.open_time_ms < previous.open_time_ms:
            return None
        self._last[key] = tick
        if previous is None:
            return TradedRange(tick.close, None, None, tick.event_time_ms)
        if tick.open_time_ms > previous.open_time_ms:
            return TradedRange(tick.close, tick.low, tick.high, tick.event_time_ms)
        low = tick.low if tick.low < previous.low else None
        high = tick.high if tick.high > previous.high else None
        return TradedRange(tick.close, low, high, tick.event_time_ms)

    def note(self, tick: MarketTick) -> bool:
        """``observe`` for a caller that will not use the range (the paper broker with no order
        open): the same memory afterwards; False where ``observe`` answers None."""
        key = (tick.ticker, tick.timeframe)
        previous = self._last.get(key)
        if previous is not None and tick.open_time_ms < previous.open_time_ms:
            return False
        self._last[key] = tick
        return True
