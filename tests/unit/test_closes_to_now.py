"""``market.closes.ClosesToNow``: the history cache's closes plus the stream's newer ones (the
semantics of ``market.history.with_newer_closes``), built once per change of either source and
shared by the decisions in between (no frame per decision)."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st
from property_budget import examples

from core.events import Candle
from market.closes import CloseSeries, ClosesToNow
from market.history import empty_ohlcv_frame, rows_to_frame, with_newer_closes

STEP = 14_400_000


def candle(open_ms: int, close: float) -> Candle:
    return Candle(
        open_time_ms=open_ms, open=close, high=close + 1, low=close - 1, close=close, volume=2
    )


class History:
    """An ``OhlcvHistory`` stand-in: a frame per ticker and its version; counts frame copies."""

    timeframe = "4h"

    def __init__(self, frame: pd.DataFrame) -> None:
        self.cached = frame
        self.updates = 0
        self.frames_read = 0

    def frame(self, ticker: str) -> pd.DataFrame:
        self.frames_read += 1
        return self.cached.copy()

    def version(self, ticker: str) -> int:
        return self.updates

    def refresh(self, frame: pd.DataFrame) -> None:
        self.cached = frame
        self.updates += 1


class Stream:
    """A ``MultiTFAggregator`` stand-in holding the stream's closed candles."""

    def __init__(self, candles: Sequence[Candle] = ()) -> None:
        self.candles = list(candles)

    def closed(self, ticker: str, timeframe: str) -> Sequence[Candle]:
        return tuple(self.candles)

    def last_closed(self, ticker: str, timeframe: str) -> Candle | None:
        return self.candles[-1] if self.candles else None


def cached_frame() -> pd.DataFrame:
    return rows_to_frame([(0, 1, 2, 0.5, 1.5, 3), (STEP, 1.5, 2, 1, 1.8, 4)])


def test_the_stream_closes_newer_than_the_cache_are_appended_as_with_newer_closes_does() -> None:
    stream = [candle(0, 9.0), candle(STEP, 9.0), candle(2 * STEP, 2.0), candle(3 * STEP, 2.5)]
    series = ClosesToNow(History(cached_frame()), Stream(stream))("BTC/USDT")
    assert series == CloseSeries((1.5, 1.8, 2.0, 2.5), 3 * STEP)  # the cache's own rows kept
    merged = with_newer_closes(cached_frame(), stream)
    assert series.closes == tuple(merged["close"]) and series.last_open_ms == merged.index[-1]
    empty = ClosesToNow(History(empty_ohlcv_frame()), Stream(stream))("BTC/USDT")
    assert empty == CloseSeries((9.0, 9.0, 2.0, 2.5), 3 * STEP)
    assert ClosesToNow(History(empty_ohlcv_frame()), Stream())("BTC/USDT") == CloseSeries((), None)


def test_decisions_between_closes_share_one_series_and_read_no_frame() -> None:
    history, stream = History(cached_frame()), Stream([candle(STEP, 1.8)])
    closes = ClosesToNow(history, stream)
    first = closes("BTC/USDT")
    assert all(closes("BTC/USDT") is first for _ in range(5))
    assert history.frames_read == 1


def test_a_stream_close_its_correction_and_a_refresh_each_rebuild_the_series() -> None:
    history, stream = History(cached_frame()), Stream([candle(STEP, 1.8)])
    closes = ClosesToNow(history, stream)
    assert closes("BTC/USDT").closes == (1.5, 1.8)
    stream.candles.append(candle(2 * STEP, 2.0))  # the stream closed a candle
    assert closes("BTC/USDT") == CloseSeries((1.5, 1.8, 2.0), 2 * STEP)
    stream.candles[-1] = candle(2 * STEP, 2.2)  # the exchange corrected that close
    assert closes("BTC/USDT") == CloseSeries((1.5, 1.8, 2.2), 2 * STEP)
    history.refresh(rows_to_frame([(0, 1, 2, 0.5, 1.5, 3), (STEP, 1, 2, 1, 1.7, 4)]))
    assert closes("BTC/USDT") == CloseSeries((1.5, 1.7, 2.2), 2 * STEP)  # the REST revision
    assert history.frames_read == 4


def test_an_unsorted_frame_is_read_in_time_order() -> None:
    frame = rows_to_frame([(STEP, 1, 2, 0.5, 1.8, 3), (0, 1, 2, 0.5, 1.5, 3)])
    assert CloseSeries.from_frame(frame) == CloseSeries((1.5, 1.8), STEP)


@settings(max_examples=examples(80), deadline=None)
@given(
    cached=st.lists(st.integers(0, 40), unique=True, max_size=12),
    streamed=st.lists(st.integers(0, 40), unique=True, max_size=12),
    shuffled=st.booleans(),
)
def test_the_series_is_with_newer_closes_for_any_overlap(
    cached: list[int], streamed: list[int], shuffled: bool
) -> None:
    """The stream's window (strictly increasing, as the aggregator keeps it) before, across or
    after the cache's rows, or with none of either: the closes of ``with_newer_closes``."""
    rows = [(i * STEP, 1, 2.0 + i, 0.5, 1.0 + i, 3) for i in sorted(cached, reverse=shuffled)]
    frame = rows_to_frame(rows) if rows else empty_ohlcv_frame()
    assert len(frame) == len(rows)  # every row a candle: none dropped
    window = [candle(i * STEP, 100.0 + i) for i in sorted(streamed)]
    series = CloseSeries.from_frame(frame, window)
    merged = with_newer_closes(frame.sort_index(), window)
    assert series.closes == tuple(float(c) for c in merged["close"])
    assert series.last_open_ms == (int(merged.index[-1]) if len(merged) else None)
