"""A ticker's closes up to now, as the rule-based decider reads them at every decision.

They are the history cache's closed candles (``market.history.OhlcvHistory``, refreshed over REST
after a close) extended with the stream's closes newer than its last row (the stream has a closed
candle at once; a decision made before the refresh must not read indicators a candle behind: the
semantics of ``market.history.with_newer_closes``). Decisions come far more often than closes, so
the series is built once per change of either source (a refresh, a stream close or its
correction) and handed out as is in between: a decision between closes builds no frame.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, Protocol

import numpy as np
import pandas as pd

from core.events import Candle


class CloseSeries(NamedTuple):
    """Closes of consecutive closed candles, oldest first (immutable: safe to share)."""

    closes: tuple[float, ...]
    last_open_ms: int | None  # the newest candle's open time; None when there is none

    @classmethod
    def from_frame(cls, frame: pd.DataFrame, newer: Sequence[Candle] = ()) -> CloseSeries:
        """From a ``market.recorded``-shaped frame (index ``open_time_ms``) plus the candles of
        ``newer`` that opened after its last row. ``newer`` is in strictly increasing open time
        (the aggregator's closed window): its newer candles are a suffix of it."""
        # history frames come sorted: skip the sort's copy, and convert the column in C
        ordered = frame if frame.index.is_monotonic_increasing else frame.sort_index()
        closes = ordered["close"].to_numpy(dtype=np.float64).tolist()
        last_open_ms = int(ordered.index[-1]) if len(ordered) else None
        # from the end: the stream keeps a 500-candle window, the cache lacks one or two of them
        start = len(newer)
        while start > 0 and (last_open_ms is None or newer[start - 1].open_time_ms > last_open_ms):
            start -= 1
        for candle in newer[start:]:
            if last_open_ms is None or candle.open_time_ms > last_open_ms:
                closes.append(candle.close)
                last_open_ms = candle.open_time_ms
        return cls(tuple(closes), last_open_ms)


class HistoryCache(Protocol):
    """What this module reads of ``market.history.OhlcvHistory``."""

    timeframe: str

    def frame(self, ticker: str) -> pd.DataFrame: ...

    def version(self, ticker: str) -> int: ...


class StreamCloses(Protocol):
    """What this module reads of ``market.aggregator.MultiTFAggregator``."""

    def closed(self, ticker: str, timeframe: str) -> Sequence[Candle]:
        """Oldest first, in strictly increasing open time."""
        ...

    def last_closed(self, ticker: str, timeframe: str) -> Candle | None: ...


class ClosesToNow:
    """``history``'s closes plus ``stream``'s newer ones, per ticker, rebuilt only on a change."""

    def __init__(self, history: HistoryCache, stream: StreamCloses) -> None:
        self._history = history
        self._stream = stream
        #: ticker -> (history version, the stream's newest closed candle, the series built)
        self._built: dict[str, tuple[int, Candle | None, CloseSeries]] = {}

    def __call__(self, ticker: str) -> CloseSeries:
        timeframe = self._history.timeframe
        version = self._history.version(ticker)
        newest = self._stream.last_closed(ticker, timeframe)
        built = self._built.get(ticker)
        # the candle by identity: a corrected close is a new Candle with the same open time
        if built is not None and built[0] == version and built[1] is newest:
            return built[2]
        series = CloseSeries.from_frame(
            self._history.frame(ticker), self._stream.closed(ticker, timeframe)
        )
        self._built[ticker] = (version, newest, series)
        return series


__all__ = ["CloseSeries", "ClosesToNow", "HistoryCache", "StreamCloses"]
