"""Loader for the bundled recorded Binance data (``data/``, see data/README.md).

Frames are pandas DataFrames indexed by candle OPEN time in Unix ms (int64), with float64 columns
``open high low close volume``. ``resample`` builds coarser candles exactly: a bucket is emitted
only when every constituent candle is present, so a gap never fabricates a candle.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from core.events import Candle
from market.timeframes import TIMEFRAME_MS, timeframe_ms, to_binance_symbol

OHLCV_COLUMNS = ("open", "high", "low", "close", "volume")
RECORDED_INTERVALS = ("5m", "1h")


def default_data_dir() -> Path:
    """The ``data/`` folder shipped beside the packages (also copied into the container image)."""
    return Path(__file__).resolve().parent.parent / "data"


class DataUnavailableError(LookupError):
    """The bundled data has no such series."""


def load_klines(ticker: str, interval: str, data_dir: Path | None = None) -> pd.DataFrame:
    """Recorded USDⓈ-M klines for ``ticker`` (``BTC/USDT``) at ``interval`` (5m or 1h)."""
    if interval not in RECORDED_INTERVALS:
        raise DataUnavailableError(
            f"recorded intervals are {RECORDED_INTERVALS}; resample for {interval!r}"
        )
    path = (
        (data_dir or default_data_dir())
        / "binance-usdm"
        / (f"{to_binance_symbol(ticker)}-{interval}.csv.gz")
    )
    if not path.is_file():
        raise DataUnavailableError(f"no recorded {interval} klines for {ticker}: {path} missing")
    frame = pd.read_csv(
        path,
        dtype={"open_time_ms": np.int64, **dict.fromkeys(OHLCV_COLUMNS, np.float64)},
    )
    frame = frame.set_index("open_time_ms").sort_index()
    _check_ohlcv(frame, path)
    return frame


def load_spot_klines(symbol: str, interval: str, data_dir: Path | None = None) -> pd.DataFrame:
    """Recorded Binance SPOT klines of ``symbol`` (``PAXGUSDT``) at ``interval`` (1h or 4h)."""
    path = (data_dir or default_data_dir()) / "binance-spot" / f"{symbol}-{interval}.csv.gz"
    if not path.is_file():
        raise DataUnavailableError(
            f"no recorded spot {interval} klines for {symbol}: {path} missing"
        )
    frame = pd.read_csv(
        path,
        dtype={"open_time_ms": np.int64, **dict.fromkeys(OHLCV_COLUMNS, np.float64)},
    )
    frame = frame.set_index("open_time_ms").sort_index()
    _check_ohlcv(frame, path)
    return frame


def load_funding(ticker: str, data_dir: Path | None = None) -> pd.DataFrame:
    """Recorded funding: index ``funding_time_ms``, column ``funding_rate`` (per 8 h)."""
    path = (
        (data_dir or default_data_dir())
        / "binance-usdm"
        / (f"{to_binance_symbol(ticker)}-funding.csv.gz")
    )
    if not path.is_file():
        raise DataUnavailableError(f"no recorded funding for {ticker}: {path} missing")
    frame = pd.read_csv(path, dtype={"funding_time_ms": np.int64, "funding_rate": np.float64})
    return frame.set_index("funding_time_ms").sort_index()


def load_fear_greed(data_dir: Path | None = None) -> pd.DataFrame:
    """Daily Fear & Greed: index ``timestamp_s`` (00:00 UTC), columns ``value``, ``classification``."""
    path = (data_dir or default_data_dir()) / "alternative-me" / "fear-greed-daily.csv"
    if not path.is_file():
        raise DataUnavailableError(f"no recorded Fear & Greed: {path} missing")
    frame = pd.read_csv(path, dtype={"timestamp_s": np.int64, "value": np.int64})
    return frame.set_index("timestamp_s").sort_index()


def to_candles(frame: pd.DataFrame) -> list[Candle]:
    """A frame of this module's shape as ``Candle`` messages, oldest first."""
    return [
        Candle(open_time_ms=int(t), open=o, high=h, low=lo, close=c, volume=v)
        for t, o, h, lo, c, v in frame[list(OHLCV_COLUMNS)].itertuples(index=True, name=None)
    ]


def resample(frame: pd.DataFrame, source_interval: str, target_interval: str) -> pd.DataFrame:
    """Aggregate complete buckets of ``source_interval`` candles into ``target_interval`` candles."""
    src_ms, dst_ms = timeframe_ms(source_interval), timeframe_ms(target_interval)
    if dst_ms % src_ms or dst_ms < src_ms:
        raise ValueError(f"cannot build {target_interval} candles from {source_interval}")
    _check_resample_input(frame, src_ms, source_interval)
    if not frame.index.is_monotonic_increasing:
        frame = frame.sort_index()  # open/close are the first/last candle in time, not in rows
    if dst_ms == src_ms:
        return frame.copy()
    bucket = frame.index.to_numpy() // dst_ms * dst_ms
    grouped = frame.groupby(bucket, sort=True)
    out = pd.DataFrame(
        {
            "open": grouped["open"].first(),
            "high": grouped["high"].max(),
            "low": grouped["low"].min(),
            "close": grouped["close"].last(),
            "volume": grouped["volume"].sum(),
        }
    )
    complete = grouped.size() == dst_ms // src_ms
    out = out[complete.to_numpy()]
    out.index.name = "open_time_ms"
    return out


def _check_resample_input(frame: pd.DataFrame, src_ms: int, source_interval: str) -> None:
    """Completeness is judged by counting candles, so each count must be one distinct candle."""
    if not frame.index.is_unique:
        raise ValueError("cannot resample: duplicate candle open times")
    misaligned = frame.index.to_numpy() % src_ms != 0
    if misaligned.any():
        first = int(frame.index.to_numpy()[misaligned][0])
        raise ValueError(f"cannot resample: open time {first} is not on the {source_interval} grid")


def _check_ohlcv(frame: pd.DataFrame, path: Path) -> None:
    values = frame[list(OHLCV_COLUMNS)].to_numpy()
    if not np.isfinite(values).all():
        raise ValueError(f"{path}: non-finite values in recorded klines")
    if not frame.index.is_unique:
        raise ValueError(f"{path}: duplicate candle open times")


__all__ = [
    "OHLCV_COLUMNS",
    "TIMEFRAME_MS",
    "DataUnavailableError",
    "default_data_dir",
    "load_fear_greed",
    "load_funding",
    "load_klines",
    "resample",
    "to_candles",
]
