"""Technical indicators on closing prices: last-value helpers.

``*_last`` helpers take the closes as an array and return the newest value only, or ``None`` when
there are too few closes. The vectorised series definitions they are checked against live with the
tests (``tests/unit/indicator_series.py``), which check those against the ``ta`` library
(tests/unit/test_indicators_ta.py). Conventions:

- ``ema``: ``alpha = 2 / (window + 1)``, seeded with the FIRST close (pandas ``adjust=False``),
  reported from the ``window``-th close on (same as ``ta``; TA-Lib seeds with an SMA instead).
- ``rsi``: Wilder's RSI: average gain / loss seeded with the simple mean of the first ``window``
  price changes, then smoothed with ``alpha = 1 / window``; first value after ``window`` changes.
  ``ta`` seeds its averages with one fictitious zero change instead of the mean, so the two differ
  on early bars by a factor decaying as ``(1 - 1/window) ** bars`` (below 1e-12 relative after
  ~400 bars for 14). No losses gives 100, as in ``ta``; but a window with no change at all gives 50
  here (``ta`` says 100), because nothing moved.
- ``rate_of_change_pct``: ``(close / close[window bars ago] - 1) * 100``, in percent (as ``ta``).
- ``bollinger_last``: the mean of the last ``window`` closes ± ``num_std`` POPULATION standard
  deviations (ddof=0, as ``ta``), ``percent_b = (close - lower) / (upper - lower)``: 0 at the lower
  band, 1 at the upper band, None when the bands have no width (a flat window).
- ``realised_vol``: sample standard deviation (ddof=1) of log returns over ``window`` returns, as a
  fraction per bar (0.01 = 1 %), or annualised when ``periods_per_year`` is given.
- trend: the spread ``(EMA fast / EMA slow - 1) * 100``; ``up`` above ``+flat_band_pct``,
  ``down`` below ``-flat_band_pct``, ``flat`` in between.

The decision path reads these through ``agent.indicator_state.IndicatorState``, which updates them
close by close; the helpers here are the batch definitions it is tested against.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Final, Literal, get_args

import numpy as np
import numpy.typing as npt
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from core.unvalidated import require_plain, unvalidated

Trend = Literal["up", "down", "flat"]
FloatArray = npt.NDArray[np.float64]
#: closes, oldest first: a list, a float array or a Series
Closes = Sequence[float] | npt.NDArray[np.floating[Any]] | pd.Series

RSI_WINDOW: Final = 14
BOLLINGER_WINDOW: Final = 20
BOLLINGER_NUM_STD: Final = 2.0
TREND_FAST_WINDOW: Final = 20
TREND_SLOW_WINDOW: Final = 50
#: an EMA 20/50 spread within ±0.5 % is no trend worth naming on 15m..4h crypto candles
TREND_FLAT_BAND_PCT: Final = 0.5


def _check_window(window: int, minimum: int = 1) -> None:
    if window < minimum:
        raise ValueError(f"window must be >= {minimum}, got {window}")


def as_closes(closes: Closes) -> FloatArray:
    """Closes as a 1-D float64 array (oldest first)."""
    array = np.asarray(closes, dtype=np.float64)
    if array.ndim != 1:
        raise ValueError(f"closes must be 1-D, got shape {array.shape}")
    return array


def rsi_from_averages(avg_gain: FloatArray, avg_loss: FloatArray) -> FloatArray:
    with np.errstate(divide="ignore", invalid="ignore"):
        value = 100.0 - 100.0 / (1.0 + avg_gain / avg_loss)
    value = np.where(avg_loss == 0.0, 100.0, value)
    return np.where((avg_loss == 0.0) & (avg_gain == 0.0), 50.0, value)


def rsi_from_average_pair(avg_gain: float, avg_loss: float) -> float:
    """``rsi_from_averages`` of one pair, bit for bit (the same IEEE operations), without its
    one-element arrays and error state: those took 6 us of a running RSI's 6.1 (every candle
    close of every series of the snapshot asks it again)."""
    if avg_loss == 0.0:
        return 50.0 if avg_gain == 0.0 else 100.0
    denominator = 1.0 + avg_gain / avg_loss
    if denominator == 0.0:  # numpy's infinity where Python would raise
        return float(rsi_from_averages(np.array([avg_gain]), np.array([avg_loss]))[0])
    return 100.0 - 100.0 / denominator


def trend_from_spread(spread_pct: float, flat_band_pct: float = TREND_FLAT_BAND_PCT) -> Trend:
    if spread_pct > flat_band_pct:
        return "up"
    if spread_pct < -flat_band_pct:
        return "down"
    return "flat"


# --- last-value helpers -----------------------------------------------------------------------


def exponential_last(values: FloatArray, alpha: float) -> float:
    """Last value of ``y[0] = x[0]; y[t] = (1 - alpha) * y[t-1] + alpha * x[t]`` in closed form."""
    decay = (1.0 - alpha) ** np.arange(len(values) - 1, -1, -1, dtype=np.float64)
    weights = alpha * decay
    weights[0] = decay[0]  # the seed enters unscaled
    return float(np.dot(weights, values))


def rsi_last(closes: Closes, window: int = RSI_WINDOW) -> float | None:
    """Wilder's RSI of the newest close; needs ``window + 1`` closes (the whole history counts)."""
    _check_window(window)
    array = as_closes(closes)
    if len(array) <= window:
        return None
    change = np.diff(array)
    gains = np.where(change > 0, change, 0.0)
    losses = np.where(change < 0, -change, 0.0)
    seeded_gains = np.concatenate(([gains[:window].mean()], gains[window:]))
    seeded_losses = np.concatenate(([losses[:window].mean()], losses[window:]))
    alpha = 1.0 / window
    avg_gain = np.array([exponential_last(seeded_gains, alpha)])
    avg_loss = np.array([exponential_last(seeded_losses, alpha)])
    return float(rsi_from_averages(avg_gain, avg_loss)[0])


def rate_of_change_last_pct(closes: Closes, window: int) -> float | None:
    _check_window(window)
    array = as_closes(closes)
    if len(array) <= window:
        return None
    return (float(array[-1]) / float(array[-1 - window]) - 1.0) * 100.0


class BollingerLast(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    middle: float
    upper: float
    lower: float
    percent_b: float | None  # None: the bands have no width (a flat window)


def mean_std(values: FloatArray) -> tuple[float, float]:
    """``(float(values.mean()), float(values.std(ddof=0)))`` of a non-empty 1-D float64 array,
    bit for bit: the same sums (``np.add.reduce``, as ``mean`` and ``var`` reduce) and IEEE steps,
    without the dispatch of ``mean``/``std`` (most of their time for a Bollinger window)."""
    count = len(values)
    mean = float(np.add.reduce(values)) / count
    deviations = values - mean
    np.square(deviations, out=deviations)
    return mean, math.sqrt(float(np.add.reduce(deviations)) / count)


def bollinger_last(
    closes: Closes,
    window: int = BOLLINGER_WINDOW,
    num_std: float = BOLLINGER_NUM_STD,
) -> BollingerLast | None:
    _check_window(window)
    array = as_closes(closes)
    if len(array) < window:
        return None
    middle, deviation = mean_std(array[-window:])
    upper, lower = middle + num_std * deviation, middle - num_std * deviation
    percent_b = (float(array[-1]) - lower) / (upper - lower) if upper != lower else None
    return BollingerLast(middle=middle, upper=upper, lower=lower, percent_b=percent_b)


# --- snapshot summary -------------------------------------------------------------------------


class TimeframeSummary(BaseModel):
    """One timeframe's headline indicators for the snapshot; ``None`` values say why in
    ``unavailable``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    trend: Trend | None
    bollinger_position: float | None  # %B of the newest close
    rsi: float | None
    unavailable: dict[str, str] = Field(default_factory=dict)


def timeframe_summary(
    have: int, trend: Trend | None, bands: BollingerLast | None, rsi_value: float | None
) -> TimeframeSummary:
    """The summary of ``have`` closes' indicators, each ``None`` with the reason."""
    unavailable: dict[str, str] = {}
    if trend is None:
        unavailable["trend"] = _too_few(have, TREND_SLOW_WINDOW)
    position = bands.percent_b if bands is not None else None
    if bands is None:
        unavailable["bollinger_position"] = _too_few(have, BOLLINGER_WINDOW)
    elif position is None:
        unavailable["bollinger_position"] = "flat window: the bands have no width"
    if rsi_value is None:
        unavailable["rsi"] = _too_few(have, RSI_WINDOW + 1)
    if _plain_summary(trend, position, rsi_value):
        # what validation makes of these (a new summary at every close of every series, ~1 us)
        return unvalidated(
            TimeframeSummary,
            {
                "trend": trend,
                "bollinger_position": position,
                "rsi": rsi_value,
                "unavailable": unavailable,
            },
        )
    return TimeframeSummary(
        trend=trend, bollinger_position=position, rsi=rsi_value, unavailable=unavailable
    )


def _plain_summary(trend: object, position: object, rsi_value: object) -> bool:
    """Whether validation would take these as they are (a trend's exact str, exact floats)."""
    return (
        (trend is None or (type(trend) is str and trend in _TRENDS))
        and (position is None or type(position) is float)
        and (rsi_value is None or type(rsi_value) is float)
    )


_TRENDS = frozenset(get_args(Trend))
require_plain(TimeframeSummary, frozenset({"trend", "bollinger_position", "rsi", "unavailable"}))
require_plain(BollingerLast, frozenset({"middle", "upper", "lower", "percent_b"}))


def _too_few(have: int, need: int) -> str:
    return f"needs {need} closes, have {have}"
