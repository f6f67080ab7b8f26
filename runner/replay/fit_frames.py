"""Replay's view of the future for the regime fit-ahead pool (``regime.fit_ahead``).

- When a 4h close is observed: at its closing update, ``open + 4h - update_interval``
  (``sim.feed.closing_updates``, the rule ``RecordedTicks`` publishes by).
- Which candles the history holds then: what ``market.history.OhlcvHistory`` fetches from
  ``sim.inprocess.RecordedOhlcvExchange`` at that instant (the closed 4h candles opened in the last
  ``history_days``), fetched here through the same exchange class on a clock pinned to the instant.

Only speed depends on this being right: ``FitAhead`` uses a planned fit only for a frame whose
bytes equal the one the daemon holds.
"""

from __future__ import annotations

import random
from collections.abc import Coroutine, Iterator
from typing import Any

import pandas as pd

from core.clock import DAY_MS
from market.ccxt_client import RetryPolicy
from market.history import PagedOhlcv, rows_to_frame
from market.timeframes import TIMEFRAME_MS, candle_open_ms
from sim.feed import SimFeed, closing_updates
from sim.inprocess import RecordedOhlcvExchange

_TIMEFRAME = "4h"
_STEP_MS = TIMEFRAME_MS[_TIMEFRAME]


class _PinnedClock:
    """A clock that reads ``now_ms`` (the exchange asks only for now)."""

    def __init__(self) -> None:
        self.at_ms = 0

    def now_ms(self) -> int:
        return self.at_ms


class RecordedFutureFrames:
    def __init__(self, feed: SimFeed, *, history_days: int, end_ms: int) -> None:
        self._feed = feed
        self._interval_ms = feed.update_interval_ms
        self._history_days = history_days
        self._end_ms = end_ms
        self._clock = _PinnedClock()
        exchange = RecordedOhlcvExchange(feed, self._clock)  # type: ignore[arg-type]
        # one attempt, no clock: the recorded exchange answers at once or refuses for good
        self._pages = PagedOhlcv(exchange, None, RetryPolicy(max_attempts=1), random.random)
        #: ticker -> every closed 4h candle up to ``end_ms``: a closed candle never changes, and a
        #: page returns the recorded candles from ``since`` whatever the holes, so each window is
        #: a slice of it (fetching each window again was most of the planner's cost)
        self._tables: dict[str, pd.DataFrame] = {}

    def close_times_ms(self, ticker: str, from_ms: int) -> Iterator[int]:
        # closing_updates takes an open interval (after, before): step back 1 ms to include from_ms
        yield from closing_updates(from_ms - 1, self._end_ms, _STEP_MS, self._interval_ms)

    def frame_at(self, ticker: str, now_ms: int) -> pd.DataFrame:
        """As ``OhlcvHistory._update`` computes its window at ``now_ms``: the closed 4h candles
        opened from ``history_days`` before ``now_ms`` up to the one that closed last."""
        window_start_ms = now_ms - self._history_days * DAY_MS
        last_open_ms = candle_open_ms(now_ms, _TIMEFRAME) - _STEP_MS
        table = self._tables.get(ticker)
        if table is None:
            table = self._tables[ticker] = self._closed_candles(ticker)
        return table[(table.index >= window_start_ms) & (table.index <= last_open_ms)]

    def _closed_candles(self, ticker: str) -> pd.DataFrame:
        """Every closed 4h candle up to ``end_ms``, fetched as the history's own paged fetch does
        (the exchange's rows, parsed as ccxt parses them)."""
        self._clock.at_ms = self._end_ms
        last_open_ms = candle_open_ms(self._end_ms, _TIMEFRAME) - _STEP_MS
        return rows_to_frame(_done(self._pages.fetch(ticker, _TIMEFRAME, 0, last_open_ms)))


def _done(coroutine: Coroutine[Any, Any, list[list[Any]]]) -> list[list[Any]]:
    """The result of a coroutine that never suspends (the recorded exchange awaits nothing)."""
    try:
        coroutine.send(None)
    except StopIteration as stop:
        result: list[list[Any]] = stop.value
        return result
    coroutine.close()
    raise RuntimeError("the recorded exchange suspended: it cannot be read ahead synchronously")


__all__ = ["RecordedFutureFrames"]
