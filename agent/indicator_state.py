"""Incremental indicators of one closed-candle series: O(1) work per close, no history rescans.

``IndicatorState.push(close)`` folds one close in; the readers (``rsi``, ``ema``, ``trend``,
``bollinger``, ``rate_of_change_pct``, ``summary``) then cost a few float operations. They give what
the batch helpers of ``agent.indicators`` give for every close pushed so far (the property test in
tests/unit/test_indicator_state.py holds them to 1e-9 relative):

- EMA and Wilder's RSI are recurrences: the batch helpers evaluate the same weights in closed form
  (one dot product), so the two differ only by float rounding (~1e-15 relative).
- Bollinger and rate of change read the last few closes from a ring buffer, laid out twice over so
  the newest ``capacity`` closes are always one contiguous slice: the same numpy reductions run on
  the same values, bit for bit.

A series whose window slides (the aggregator keeps its newest 500 closes) is fed every close since
the state was built: the EMA's first close then weighs ``(1 - alpha) ** 500`` (< 1e-8 for the slow
EMA of 50) in the state and nothing in the batch on the newest 500; RSI's seed < 1e-16.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from agent.indicators import (
    BOLLINGER_NUM_STD,
    BOLLINGER_WINDOW,
    RSI_WINDOW,
    TREND_FAST_WINDOW,
    TREND_FLAT_BAND_PCT,
    TREND_SLOW_WINDOW,
    BollingerLast,
    FloatArray,
    TimeframeSummary,
    Trend,
    mean_std,
    rsi_from_average_pair,
    timeframe_summary,
    trend_from_spread,
)
from core.unvalidated import unvalidated

_FLOAT_OR_NONE = (float, type(None))


class _Ema:
    """``y[0] = x[0]; y[t] = (1 - alpha) * y[t-1] + alpha * x[t]``, reported from ``window`` closes."""

    __slots__ = ("_alpha", "_keep", "value", "window")

    def __init__(self, window: int) -> None:
        self.window = window
        self._alpha = 2.0 / (window + 1.0)
        self._keep = 1.0 - self._alpha
        self.value = 0.0

    def push(self, close: float, first: bool) -> None:
        self.value = close if first else self._keep * self.value + self._alpha * close


class _Wilder:
    """Average gain and loss: the plain mean of the first ``window`` changes, then ``1 / window``."""

    __slots__ = ("_alpha", "_keep", "_seed_gains", "_seed_losses", "avg_gain", "avg_loss", "window")

    def __init__(self, window: int) -> None:
        self.window = window
        self._alpha = 1.0 / window
        self._keep = 1.0 - self._alpha
        self._seed_gains: list[float] = []
        self._seed_losses: list[float] = []
        self.avg_gain = self.avg_loss = 0.0

    @property
    def ready(self) -> bool:
        return len(self._seed_gains) >= self.window

    def push(self, change: float) -> None:
        gain, loss = (change, 0.0) if change > 0 else (0.0, -change if change < 0 else 0.0)
        if not self.ready:
            self._seed_gains.append(gain)
            self._seed_losses.append(loss)
            if len(self._seed_gains) == self.window:  # numpy's mean, as the batch helper's seed
                self.avg_gain = float(np.mean(np.array(self._seed_gains)))
                self.avg_loss = float(np.mean(np.array(self._seed_losses)))
            return
        self.avg_gain = self._keep * self.avg_gain + self._alpha * gain
        self.avg_loss = self._keep * self.avg_loss + self._alpha * loss


class IndicatorState:
    """The running indicators of one series of closes (oldest first, pushed one by one)."""

    __slots__ = ("_emas", "_ring", "_rsi", "_slot", "capacity", "count", "last_close")

    def __init__(
        self,
        *,
        rsi_window: int = RSI_WINDOW,
        ema_windows: Iterable[int] = (TREND_FAST_WINDOW, TREND_SLOW_WINDOW),
        capacity: int = BOLLINGER_WINDOW,
    ) -> None:
        """``capacity``: how many newest closes the ring keeps (the widest Bollinger window, or
        rate-of-change window + 1, this state will be asked for)."""
        windows = tuple(dict.fromkeys(ema_windows))
        if rsi_window < 1 or capacity < 1 or any(w < 1 for w in windows):
            raise ValueError("windows and capacity must be >= 1")
        self.capacity = capacity
        self._ring = np.zeros(2 * capacity, dtype=np.float64)
        self._slot = 0  # where the next close goes (mod capacity)
        self._rsi = _Wilder(rsi_window)
        self._emas = {window: _Ema(window) for window in windows}
        self.count = 0
        self.last_close = 0.0

    @classmethod
    def of(cls, closes: Iterable[float], **windows: int) -> IndicatorState:
        state = cls(**windows)  # type: ignore[arg-type]
        state.extend(closes)
        return state

    def extend(self, closes: Iterable[float]) -> None:
        for close in closes:
            self.push(float(close))

    def push(self, close: float) -> None:
        first = self.count == 0
        if not first:
            self._rsi.push(close - self.last_close)
        for ema in self._emas.values():
            ema.push(close, first)
        slot = self._slot
        self._ring[slot] = self._ring[slot + self.capacity] = close
        self._slot = (slot + 1) % self.capacity
        self.count += 1
        self.last_close = close

    def tail(self, size: int) -> FloatArray:
        """The newest ``size`` closes, oldest first (a view: copy it to keep it)."""
        if not 0 < size <= min(self.capacity, self.count):
            raise ValueError(f"tail of {size} from {min(self.capacity, self.count)} kept closes")
        end = self._slot + self.capacity
        return self._ring[end - size : end]

    # --- readers: None when too few closes, as the batch helpers -------------------------------

    def ema(self, window: int) -> float | None:
        ema = self._emas.get(window)
        if ema is None:
            raise ValueError(f"no EMA of {window} kept (kept: {sorted(self._emas)})")
        return ema.value if self.count >= window else None

    def rsi(self) -> float | None:
        if not self._rsi.ready:
            return None
        return rsi_from_average_pair(self._rsi.avg_gain, self._rsi.avg_loss)

    def trend(
        self,
        fast: int = TREND_FAST_WINDOW,
        slow: int = TREND_SLOW_WINDOW,
        flat_band_pct: float = TREND_FLAT_BAND_PCT,
    ) -> Trend | None:
        fast_value, slow_value = self.ema(fast), self.ema(slow)
        if fast_value is None or slow_value is None:
            return None
        return trend_from_spread((fast_value / slow_value - 1.0) * 100.0, flat_band_pct)

    def bollinger(
        self, window: int = BOLLINGER_WINDOW, num_std: float = BOLLINGER_NUM_STD
    ) -> BollingerLast | None:
        if window > self.capacity:
            raise ValueError(f"Bollinger window {window} over the ring's {self.capacity} closes")
        if self.count < window:
            return None
        middle, deviation = mean_std(self.tail(window))
        upper, lower = middle + num_std * deviation, middle - num_std * deviation
        percent_b = (self.last_close - lower) / (upper - lower) if upper != lower else None
        if type(upper) is type(lower) is float and type(percent_b) in _FLOAT_OR_NONE:
            # floats already (mean_std's, and a float num_std's): what validation makes, at
            # every close of every series without its ~1 us
            return unvalidated(
                BollingerLast,
                {"middle": middle, "upper": upper, "lower": lower, "percent_b": percent_b},
            )
        return BollingerLast(middle=middle, upper=upper, lower=lower, percent_b=percent_b)

    def rate_of_change_pct(self, window: int) -> float | None:
        if window + 1 > self.capacity:
            raise ValueError(f"rate of change over {window} needs a ring of {window + 1} closes")
        if self.count <= window:
            return None
        return (self.last_close / float(self.tail(window + 1)[0]) - 1.0) * 100.0

    def summary(self) -> TimeframeSummary:
        """The same summary as the batch computation over the same closes (tests check it)."""
        return timeframe_summary(self.count, self.trend(), self.bollinger(), self.rsi())
