"""One ticker's recording as ``sim.feed.SimFeed`` reads it: base bars padded to whole 4h rows and,
per served timeframe, the running highs, lows and volumes of each candle's earlier bars.

It is the loading and numpy precomputation done once per ticker, apart from the feed's O(1)
lookups at an instant; ``Gap`` (a hole in the recorded bars) is found here while loading.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import numpy as np
import numpy.typing as npt
import pandas as pd

from market.recorded import (
    BASE_INTERVAL_MS,
    DataUnavailableError,
    MalformedDataError,
    kline_path,
    load_funding,
    load_klines,
    resample,
)
from market.timeframes import TIMEFRAME_MS
from sim.path import BarState

#: every supported timeframe divides this, so buckets never straddle the padded array's rows
_ALIGN_MS = max(TIMEFRAME_MS.values())
_MAX_DECIMALS = 8

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


class Bucketed(NamedTuple):
    """One timeframe's precomputed per-slot values (slot = 5m bar index in the padded arrays)."""

    bars_per_candle: int
    prior_high: FloatArray  # max high of the earlier bars of the slot's candle (-inf for the first)
    prior_low: FloatArray  # min low of the earlier bars (+inf for the first)
    prior_volume: FloatArray  # summed volume of the earlier bars (0 for the first)
    closed_volume: FloatArray  # per candle: resampled volume, NaN when the candle is incomplete
    closed_open_ms: IntArray  # complete (resampled) candles, for closed_candles()
    closed_ohlcv: FloatArray  # shape (candles, 5)


class Gap(NamedTuple):
    """Base bars missing from a recording: ``from_ms`` (first missing open) .. ``to_ms`` (the next
    recorded bar's open, exclusive)."""

    ticker: str
    from_ms: int
    to_ms: int


def served_timeframes(base_interval: str) -> dict[str, int]:
    """The base bar itself plus every stream timeframe that is a whole number of base bars."""
    bar_ms = BASE_INTERVAL_MS[base_interval]
    coarser = {tf: ms for tf, ms in TIMEFRAME_MS.items() if ms >= bar_ms and ms % bar_ms == 0}
    return {base_interval: bar_ms, **coarser}


class TickerSeries:
    """One ticker's recording, padded to whole 4h rows so every timeframe reshapes cleanly.

    With a ``window`` (first ms, end ms) only the 4h rows that hold it are kept: the arrays are
    dense, so a stray bar years away made them span the years between (a 2099 bar in a 3-day
    file: 1.2 GB). With ``hole_after`` (from ms, longest ms) the bars after the first hole longer
    than that ending after ``from ms`` are left out too (the simulator's open end). The span, gaps
    and precision stay the whole recording's."""

    def __init__(
        self,
        ticker: str,
        data_dir: Path | None,
        base_interval: str,
        window: tuple[int, int] | None = None,
        hole_after: tuple[int, int] | None = None,
    ) -> None:
        bar_ms = BASE_INTERVAL_MS[base_interval]
        self.bar_ms = bar_ms
        frame = load_klines(ticker, base_interval, data_dir)
        path = kline_path(ticker, base_interval, data_dir)
        if frame.empty:
            raise MalformedDataError(f"{path}: no {base_interval} klines for {ticker}")
        open_ms = frame.index.to_numpy(dtype=np.int64)
        if (open_ms % bar_ms).any():
            first = int(open_ms[open_ms % bar_ms != 0][0])
            raise MalformedDataError(
                f"{path}: {base_interval} bar opening at {first} ms is off the {base_interval} grid"
            )
        holes = np.flatnonzero(np.diff(open_ms) > bar_ms)
        self.gaps = [
            Gap(ticker, int(open_ms[i]) + bar_ms, int(open_ms[i + 1])) for i in holes.tolist()
        ]
        self.first_open_ms = int(open_ms[0])
        self.last_open_ms = int(open_ms[-1])
        # the recording's precision, whatever part of it is kept
        prices = frame[["open", "high", "low", "close"]].to_numpy()
        self.price_decimals = _decimals(prices)
        self.quantity_decimals = _decimals(frame["volume"].to_numpy())
        if window is not None:
            frame = frame[_in_rows(frame.index.to_numpy(dtype=np.int64), window)]
            open_ms = frame.index.to_numpy(dtype=np.int64)
        #: the first bar left out past a long hole (None: none was)
        self.left_out_ms: int | None = None
        if hole_after is not None and len(open_ms):
            kept = _before_long_hole(open_ms, *hole_after)
            if not kept.all():
                self.left_out_ms = int(open_ms[~kept][0])
                frame = frame[kept]
                open_ms = frame.index.to_numpy(dtype=np.int64)
        self.base_ms = _row_start(int(open_ms[0]) if len(open_ms) else self.first_open_ms)
        rows = -(-(int(open_ms[-1]) + bar_ms - self.base_ms) // _ALIGN_MS) if len(open_ms) else 0
        self.slots = rows * (_ALIGN_MS // bar_ms)
        where = (open_ms - self.base_ms) // bar_ms
        self.where = where
        #: one (slots, 5) block: the columns are views of it, and the base timeframe's closed
        #: candles are a slice of it when the recording has no hole (see ``_base_bucket``)
        self.bars = np.full((self.slots, 5), np.nan)
        self.bars[where] = frame[["open", "high", "low", "close", "volume"]].to_numpy(np.float64)
        self.open, self.high, self.low = self.bars[:, 0], self.bars[:, 1], self.bars[:, 2]
        self.close, self.volume = self.bars[:, 3], self.bars[:, 4]
        self.by_timeframe = {
            tf: self._bucket(frame, base_interval, tf, tf_ms)
            for tf, tf_ms in served_timeframes(base_interval).items()
        }
        #: (slot, update index, its state): the last base-bar state ``kline_state`` walked
        self.bar_memo: tuple[int, int, BarState] | None = None

        self.funding_missing: str | None = None
        try:
            funding = load_funding(ticker, data_dir)
        except DataUnavailableError as exc:  # optional: the snapshot reports funding unavailable
            self.funding_missing = str(exc)
            funding = pd.DataFrame({"funding_rate": []}, index=pd.Index([], dtype=np.int64))
        self.funding_ms = funding.index.to_numpy(dtype=np.int64)
        self.funding_rate = funding["funding_rate"].to_numpy(dtype=np.float64)
        #: ``funding_ms`` as ints, for ``bisect`` (every derivatives poll looks up each ticker's
        #: settlement: numpy's searchsorted of one number costs several times as much)
        self.funding_times: list[int] = self.funding_ms.tolist()

    def _bucket(
        self, frame: pd.DataFrame, base_interval: str, timeframe: str, tf_ms: int
    ) -> Bucketed:
        bar_ms = self.bar_ms
        k = tf_ms // bar_ms
        if k == 1:
            return self._base_bucket(frame)
        high = np.maximum.accumulate(self.high.reshape(-1, k), axis=1)  # NaN propagates
        low = np.minimum.accumulate(self.low.reshape(-1, k), axis=1)
        volume = np.cumsum(self.volume.reshape(-1, k), axis=1)
        prior_high = np.hstack([np.full((high.shape[0], 1), -np.inf), high[:, :-1]]).ravel()
        prior_low = np.hstack([np.full((low.shape[0], 1), np.inf), low[:, :-1]]).ravel()
        prior_volume = np.hstack([np.zeros((volume.shape[0], 1)), volume[:, :-1]]).ravel()

        closed = resample(frame, base_interval, timeframe)
        closed_open_ms = closed.index.to_numpy(dtype=np.int64)
        closed_volume = np.full(self.slots // k, np.nan)
        closed_volume[(closed_open_ms - self.base_ms) // (k * bar_ms)] = closed["volume"].to_numpy()
        ohlcv = closed[["open", "high", "low", "close", "volume"]].to_numpy(dtype=np.float64)
        return Bucketed(
            k, prior_high, prior_low, prior_volume, closed_volume, closed_open_ms, ohlcv
        )

    def _base_bucket(self, frame: pd.DataFrame) -> Bucketed:
        """The base bar's own timeframe without copies (they were the feed's largest arrays):
        a candle is one bar, so nothing comes before it (constant views) and its closed volume
        and OHLCV are the bars' own."""
        slots = self.slots
        where = self.where
        if len(where) and where[-1] - where[0] + 1 == len(where):  # no hole: a slice, a view
            closed_ohlcv = self.bars[where[0] : where[-1] + 1]
        else:
            closed_ohlcv = self.bars[where]
        return Bucketed(
            1,
            np.broadcast_to(-np.inf, slots),
            np.broadcast_to(np.inf, slots),
            np.broadcast_to(0.0, slots),
            self.volume,
            frame.index.to_numpy(dtype=np.int64),
            closed_ohlcv,
        )


def _row_start(at_ms: int) -> int:
    return at_ms - at_ms % _ALIGN_MS


def _in_rows(open_ms: IntArray, window: tuple[int, int]) -> npt.NDArray[np.bool_]:
    """The bars in the whole 4h rows that hold ``window``: a cut on a row's edge leaves every
    candle either whole or out, so no candle in the window loses a bar to it."""
    first_ms, end_ms = window
    return np.asarray(
        (open_ms >= _row_start(first_ms)) & (open_ms < -(-end_ms // _ALIGN_MS) * _ALIGN_MS)
    )


def _before_long_hole(open_ms: IntArray, from_ms: int, longest_ms: int) -> npt.NDArray[np.bool_]:
    """The bars before the first hole longer than ``longest_ms`` that ends after ``from_ms``."""
    long_holes = np.flatnonzero((np.diff(open_ms) > longest_ms) & (open_ms[1:] > from_ms))
    if not len(long_holes):
        return np.ones(len(open_ms), dtype=np.bool_)
    return np.asarray(open_ms <= open_ms[long_holes[0]])


def _decimals(values: FloatArray) -> int:
    """Fewest decimals that reproduce every recorded value (the symbol's tick/step precision)."""
    for decimals in range(_MAX_DECIMALS + 1):
        if np.array_equal(np.round(values, decimals), values):
            return decimals
    return _MAX_DECIMALS
