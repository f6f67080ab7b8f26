"""Helpers for the regime tests: recorded 4h frames, synthetic candles and monthly series.

Everything synthetic here is a test fixture built by the tests, never market data.
"""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd

from market.recorded import load_klines, resample
from market.timeframes import TIMEFRAME_MS

STEP_4H_MS = TIMEFRAME_MS["4h"]
START_MS = 1_735_689_600_000  # 2025-01-01 00:00 UTC
BARS_180_DAYS = 180 * 6


@functools.cache
def recorded_4h(ticker: str) -> pd.DataFrame:
    """The bundled 1h klines of ``ticker`` resampled to 4h (every recorded 4h candle)."""
    return resample(load_klines(ticker, "1h"), "1h", "4h")


def last_180_days(ticker: str) -> pd.DataFrame:
    return recorded_4h(ticker).iloc[-BARS_180_DAYS:].copy()


def candles_from_returns(
    log_returns: np.ndarray, *, start_ms: int = START_MS, first_close: float = 100.0
) -> pd.DataFrame:
    """A 4h OHLCV frame whose closes follow ``log_returns`` (open = previous close)."""
    closes = first_close * np.exp(np.concatenate([[0.0], np.cumsum(log_returns)]))
    opens = np.concatenate([[first_close], closes[:-1]])
    index = pd.Index(
        start_ms + STEP_4H_MS * np.arange(len(closes), dtype=np.int64),
        dtype=np.int64,
        name="open_time_ms",
    )
    return pd.DataFrame(
        {
            "open": opens,
            "high": np.maximum(opens, closes) * 1.001,
            "low": np.minimum(opens, closes) * 0.999,
            "close": closes,
            "volume": np.full(len(closes), 10.0),
        },
        index=index,
    )


def two_regime_candles(
    *, block_bars: int = 120, blocks: int = 4, calm_sd: float = 0.002, wild_sd: float = 0.02
) -> tuple[pd.DataFrame, np.ndarray]:
    """Alternating calm / wild blocks of Gaussian log returns (calm first), seeded.

    Returns the frame and, per candle, True where the candle's return belongs to a calm block.
    """
    rng = np.random.default_rng(7)
    returns: list[np.ndarray] = []
    calm_flags: list[np.ndarray] = []
    for block in range(blocks):
        calm = block % 2 == 0
        returns.append(rng.normal(0.0, calm_sd if calm else wild_sd, block_bars))
        calm_flags.append(np.full(block_bars, calm))
    frame = candles_from_returns(np.concatenate(returns))
    # candle 0 has no return; candle i carries return i - 1
    return frame, np.concatenate([[True], np.concatenate(calm_flags)])


def monthly_series(
    values: list[float] | np.ndarray, *, first_month: str = "2021-01-01", name: str = "X"
) -> pd.Series:
    """Monthly observations dated the first of each month, like FRED's."""
    index = pd.date_range(first_month, periods=len(values), freq="MS")
    return pd.Series(np.asarray(values, dtype=np.float64), index=index, name=name)


def compounding(start: float, monthly_growth_pct: list[float] | np.ndarray) -> np.ndarray:
    """A level series growing by ``monthly_growth_pct[i]`` % in month i (first value ``start``)."""
    factors = 1.0 + np.asarray(monthly_growth_pct, dtype=np.float64) / 100.0
    return start * np.concatenate([[1.0], np.cumprod(factors)])


def utc_ms(text: str) -> int:
    return int(pd.Timestamp(text, tz="UTC").timestamp() * 1000)
