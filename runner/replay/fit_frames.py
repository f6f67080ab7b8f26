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

from collections.abc import Coroutine, Iterator
from typing import Any

import pandas as pd

from market.ccxt_client import to_ccxt_symbol
from market.history import page_limit, rows_to_frame
from market.timeframes import TIMEFRAME_MS, candle_open_ms
from sim.feed import SimFeed, closing_updates
from sim.inprocess import RecordedOhlcvExchange

DAY_MS = 86_400_000
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
        self._exchange = RecordedOhlcvExchange(feed, self._clock)  # type: ignore[arg-type]
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
            table = self._tables[ticker] = self._fetched(ticker, 0, self._end_ms)
        return table[(table.index >= window_start_ms) & (table.index <= last_open_ms)]

    def _fetched(self, ticker: str, since: int, now_ms: int) -> pd.DataFrame:
        """The closed 4h candles opened from ``since`` on, as the history's paged fetch at
        ``now_ms`` receives them (the exchange's rows, parsed as ccxt parses them)."""
        self._clock.at_ms = now_ms
        last_open_ms = candle_open_ms(now_ms, _TIMEFRAME) - _STEP_MS
        rows: list[list[Any]] = []
        while since <= last_open_ms:  # the pages OhlcvHistory's fetch asks for
            limit = page_limit(since, last_open_ms, _STEP_MS)
            page = _done(
                self._exchange.fetch_ohlcv(
                    to_ccxt_symbol(ticker),
                    _TIMEFRAME,
                    since=since,
                    limit=limit,
                    params={"until": last_open_ms},
                )
            )
            page = [row for row in page if since <= int(row[0]) <= last_open_ms]
            if not page:
                break
            rows.extend(page)
            since = int(page[-1][0]) + _STEP_MS
            if len(page) < limit:
                break
        return rows_to_frame(rows)


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
