"""Replay's view of the future for the regime fit-ahead pool (``regime.fit_ahead``).

- When a 4h close is observed: at its closing update, ``open + 4h - update_interval``
  (``sim.feed.closing_updates``, the rule ``RecordedTicks`` publishes by).
- Which candles the history holds then: what ``market.history.OhlcvHistory`` fetches from
  ``sim.inprocess.RecordedOhlcvExchange`` at that instant (the closed 4h candles opened in the last
  ``history_days``), fetched here through the same exchange class on a clock pinned to the instant.

Consecutive frames share all but a day of their candles, and a closed candle's row never changes,
so each row is parsed once (``_RowMemo``).

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
from sim.feed import KlineState, SimFeed, closing_updates
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


class _RowMemo(RecordedOhlcvExchange):
    """The recorded exchange, each closed candle's row made once (rows are never modified)."""

    def __init__(self, feed: SimFeed, clock: _PinnedClock) -> None:
        super().__init__(feed, clock)  # type: ignore[arg-type]
        self._rows: dict[tuple[str, str, int], list[Any]] = {}

    def _row(self, candle: KlineState) -> list[Any]:
        key = (candle.ticker, candle.timeframe, candle.open_time_ms)
        row = self._rows.get(key)
        if row is None:
            row = self._rows[key] = super()._row(candle)
        return row


class RecordedFutureFrames:
    def __init__(self, feed: SimFeed, *, history_days: int, end_ms: int) -> None:
        self._feed = feed
        self._interval_ms = feed.update_interval_ms
        self._history_days = history_days
        self._end_ms = end_ms
        self._clock = _PinnedClock()
        self._exchange = _RowMemo(feed, self._clock)

    def close_times_ms(self, ticker: str, from_ms: int) -> Iterator[int]:
        # closing_updates takes an open interval (after, before): step back 1 ms to include from_ms
        yield from closing_updates(from_ms - 1, self._end_ms, _STEP_MS, self._interval_ms)

    def frame_at(self, ticker: str, now_ms: int) -> pd.DataFrame:
        """As ``OhlcvHistory._update`` computes its window at ``now_ms``."""
        self._clock.at_ms = now_ms
        window_start_ms = now_ms - self._history_days * DAY_MS
        last_open_ms = candle_open_ms(now_ms, _TIMEFRAME) - _STEP_MS
        rows: list[list[Any]] = []
        since = window_start_ms
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
        frame = rows_to_frame(rows)
        return frame[frame.index >= window_start_ms]


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
