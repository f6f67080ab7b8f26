"""The indicators as vectorised series and as batch summaries: the reference definitions the decision path's last-value
helpers (``agent.indicators``) and incremental state (``agent.indicator_state``) are tested
against, themselves checked against the ``ta`` library. Only tests use them, so they live here.

Each takes a ``pd.Series`` of closes (any index, oldest first) and returns a series on the same
index, NaN where the window is not yet full.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from agent.indicators import (
    RSI_WINDOW,
    TREND_FAST_WINDOW,
    TREND_FLAT_BAND_PCT,
    TREND_SLOW_WINDOW,
    Closes,
    FloatArray,
    TimeframeSummary,
    Trend,
    as_closes,
    bollinger_last,
    exponential_last,
    rsi_from_averages,
    rsi_last,
    timeframe_summary,
    trend_from_spread,
)


def _check_window(window: int, minimum: int = 1) -> None:
    if window < minimum:
        raise ValueError(f"window must be >= {minimum}, got {window}")


def ema(close: pd.Series, window: int) -> pd.Series:
    _check_window(window)
    return close.ewm(span=window, adjust=False, min_periods=window).mean()


def rsi(close: pd.Series, window: int = RSI_WINDOW) -> pd.Series:
    """Wilder's RSI (see the module docstring for the seed convention)."""
    _check_window(window)
    values = np.full(len(close), np.nan)
    if len(close) > window:
        change = np.diff(close.to_numpy(dtype=np.float64))
        gains = np.where(change > 0, change, 0.0)
        losses = np.where(change < 0, -change, 0.0)
        avg_gain = _wilder_averages(gains, window)
        avg_loss = _wilder_averages(losses, window)
        values[window:] = rsi_from_averages(avg_gain, avg_loss)
    return pd.Series(values, index=close.index, dtype=np.float64)


def _wilder_averages(moves: FloatArray, window: int) -> FloatArray:
    """Seeded with the plain mean of the first ``window`` moves, then ``alpha = 1 / window``."""
    seeded = np.concatenate(([moves[:window].mean()], moves[window:]))
    return pd.Series(seeded).ewm(alpha=1.0 / window, adjust=False).mean().to_numpy()


def rate_of_change_pct(close: pd.Series, window: int) -> pd.Series:
    _check_window(window)
    previous = close.shift(window)
    return (close / previous - 1.0) * 100.0


def _rolling_windows(values: FloatArray, window: int) -> FloatArray:
    return np.lib.stride_tricks.sliding_window_view(values, window)


def _rolling_std(close: pd.Series, window: int, ddof: int) -> pd.Series:
    """Two-pass std per full window, NaN before it fills.

    pandas' rolling std adds one value and drop one: their error follows the largest values
    that ever passed through, so a flat window after a volatile stretch reads a std of ~1e-6 of
    the price instead of 0 (the square root of a cancellation error). Windows here are tens of
    bars, so recomputing each one costs little and matches the ``*_last`` helpers exactly.
    """
    values = close.to_numpy(dtype=np.float64)
    out = np.full(len(values), np.nan)
    if len(values) >= window:
        windows = _rolling_windows(values, window)
        out[window - 1 :] = windows.std(axis=1, ddof=ddof)
    return pd.Series(out, index=close.index)


def realised_vol(close: pd.Series, window: int, periods_per_year: float | None = None) -> pd.Series:
    _check_window(window, minimum=2)
    log_returns = pd.Series(np.log(close.to_numpy(dtype=np.float64)), index=close.index).diff()
    vol = _rolling_std(log_returns, window, ddof=1)
    return vol * math.sqrt(periods_per_year) if periods_per_year is not None else vol


# --- last values composed the batch way (what IndicatorState is checked against)


def ema_last(closes: Closes, window: int) -> float | None:
    _check_window(window)
    array = as_closes(closes)
    if len(array) < window:
        return None
    return exponential_last(array, 2.0 / (window + 1.0))


def trend_last(
    closes: Closes,
    fast: int = TREND_FAST_WINDOW,
    slow: int = TREND_SLOW_WINDOW,
    flat_band_pct: float = TREND_FLAT_BAND_PCT,
) -> Trend | None:
    if fast >= slow:
        raise ValueError(f"fast window ({fast}) must be shorter than slow ({slow})")
    fast_value, slow_value = ema_last(closes, fast), ema_last(closes, slow)
    if fast_value is None or slow_value is None:
        return None
    return trend_from_spread((fast_value / slow_value - 1.0) * 100.0, flat_band_pct)


def summarise_closes(closes: Closes) -> TimeframeSummary:
    """Trend, Bollinger position and RSI of the newest close, from the whole series (the batch
    form of ``agent.indicator_state.IndicatorState.summary``)."""
    array = as_closes(closes)
    return timeframe_summary(len(array), trend_last(array), bollinger_last(array), rsi_last(array))
