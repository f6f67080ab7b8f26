"""Regime features from 4h OHLCV candles: a pure function, no state.

For each candle ``t`` (only the close is used; the other columns are not needed by these features):

- ``log_return``: ``ln(close_t / close_{t-1})``, defined only when candle ``t-1`` opened exactly one
  step earlier; across a gap in the frame it is missing rather than a return over an unknown span.
- ``realised_vol``: sample standard deviation (ddof=1) of the last ``rv_window_bars`` log returns.
  Default 6 bars = 24 h of 4h candles: one day, short enough to react within a day, long enough that
  a single wick does not dominate. Per-bar units (not annualised).
- ``vol_of_vol``: sample standard deviation of the last ``vov_window_bars`` realised-vol values.
  Default 6 bars: whether the day-scale volatility itself is stable or lurching.

Rows without a full window (the warm-up, ``1 + (rv - 1) + (vov - 1)`` = 11 rows at the defaults,
and the same span after any gap) are dropped. Every feature row therefore comes from an unbroken run
of candles; ``segment_lengths`` splits the rows into the runs, so the HMM never treats a gap as one
step.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pandas as pd

from market.timeframes import TIMEFRAME_MS
from regime.config import RV_WINDOW_BARS, VOV_WINDOW_BARS

try:  # pandas' private kernel: a pandas that moves it takes the public path below (same floats)
    from pandas._libs.window.aggregations import (  # type: ignore[import-not-found]
        roll_var as _roll_var,
    )
except ImportError:  # pragma: no cover - the installed pandas has it
    _roll_var = None

FEATURE_COLUMNS = ("log_return", "realised_vol", "vol_of_vol")
STEP_MS_4H = TIMEFRAME_MS["4h"]


Array = np.ndarray[Any, Any]


class BadCandlesError(ValueError):
    """The frame cannot give features (wrong shape, non-positive or non-finite closes)."""


def warm_up_rows(
    rv_window_bars: int = RV_WINDOW_BARS, vov_window_bars: int = VOV_WINDOW_BARS
) -> int:
    """Candles consumed before the first feature row of an unbroken run."""
    return 1 + (rv_window_bars - 1) + (vov_window_bars - 1)


def regime_features(
    frame: pd.DataFrame,
    *,
    rv_window_bars: int = RV_WINDOW_BARS,
    vov_window_bars: int = VOV_WINDOW_BARS,
    step_ms: int = STEP_MS_4H,
) -> pd.DataFrame:
    """4h OHLCV frame (index ``open_time_ms``) -> feature frame, same index minus warm-up/gap rows."""
    values, open_ms = feature_rows(
        frame, rv_window_bars=rv_window_bars, vov_window_bars=vov_window_bars, step_ms=step_ms
    )
    index = pd.Index(open_ms, dtype=np.int64, name=frame.index.name)
    return pd.DataFrame(values, index=index, columns=list(FEATURE_COLUMNS))


def feature_rows(
    frame: pd.DataFrame,
    *,
    rv_window_bars: int = RV_WINDOW_BARS,
    vov_window_bars: int = VOV_WINDOW_BARS,
    step_ms: int = STEP_MS_4H,
) -> tuple[Array, Array]:
    """``regime_features`` as arrays, without building frames (the predict on every 4h close):
    the feature rows, shape (rows, 3) in ``FEATURE_COLUMNS`` order, and their open times.

    The rolling standard deviations are pandas' own kernel (``Series.rolling(w,
    min_periods=w).std(ddof=1)`` runs ``roll_var`` over the same bounds, then a square root
    that clips a negative variance to 0), so the floats are pandas' to the bit
    (``tests/unit/test_regime_features.py`` holds them to ``Series.rolling``)."""
    if rv_window_bars < 2 or vov_window_bars < 2:
        raise ValueError("a standard deviation needs windows of at least 2 bars")
    if "close" not in frame.columns:
        raise BadCandlesError(f"frame has no close column (columns: {list(frame.columns)})")
    open_ms = frame.index.to_numpy(dtype=np.int64)
    if len(open_ms) > 1 and not (np.diff(open_ms) > 0).all():  # a cache's frame never is
        if not frame.index.is_unique:
            raise BadCandlesError("frame has duplicate candle open times")
        frame = frame.sort_index()
        open_ms = frame.index.to_numpy(dtype=np.int64)
    close = frame["close"].to_numpy(dtype=np.float64)
    if not (np.isfinite(close).all() and (close > 0).all()):
        raise BadCandlesError("closes must be finite and > 0")

    returns = np.full(len(close), np.nan)
    if len(close) > 1:
        contiguous = np.diff(open_ms) == step_ms
        returns[1:] = np.where(contiguous, np.diff(np.log(close)), np.nan)
    # min_periods = window: any missing return inside the window leaves the value missing
    realised_vol = _rolling_std(returns, rv_window_bars)
    vol_of_vol = _rolling_std(realised_vol, vov_window_bars)
    # a row is kept when none of its three features is missing; the columns are picked before
    # they are stacked (a 2-D row-wise any and boolean index cost three times as much)
    keep = ~(np.isnan(returns) | np.isnan(realised_vol) | np.isnan(vol_of_vol))
    values = np.column_stack((returns[keep], realised_vol[keep], vol_of_vol[keep]))
    return values, open_ms[keep]


def _rolling_std(values: Array, window: int) -> Array:
    """``pd.Series(values).rolling(window, min_periods=window).std(ddof=1).to_numpy()``"""
    if _roll_var is None:
        return _public_rolling_std(values, window)
    n = len(values)
    end = np.arange(1, n + 1, dtype=np.int64)
    start = np.clip(end - window, 0, n)
    variance: Array = _roll_var(values, start, end, window, ddof=1)
    with np.errstate(all="ignore"):
        std: Array = np.sqrt(variance)
    std[variance < 0] = 0
    return std


def _public_rolling_std(values: Array, window: int) -> Array:
    std: Array = pd.Series(values).rolling(window, min_periods=window).std(ddof=1).to_numpy()
    return std


def segment_lengths(index: pd.Index | Array, step_ms: int = STEP_MS_4H) -> list[int]:
    """Lengths of the unbroken runs (consecutive rows ``step_ms`` apart) of a sorted index."""
    if len(index) == 0:
        return []
    breaks = np.flatnonzero(np.diff(np.asarray(index, dtype=np.int64)) != step_ms) + 1
    edges = [0, *breaks.tolist(), len(index)]
    return [end - start for start, end in itertools.pairwise(edges)]


__all__ = [
    "FEATURE_COLUMNS",
    "RV_WINDOW_BARS",
    "STEP_MS_4H",
    "VOV_WINDOW_BARS",
    "BadCandlesError",
    "feature_rows",
    "regime_features",
    "segment_lengths",
    "warm_up_rows",
]
