"""Loader for recorded Binance data: the bundled ``data/`` folder or a user's own data dir.

Layout (data/README.md; ``vigil data fetch`` / ``import`` write the same):
``binance-usdm/<SYMBOL>-<interval>.csv.gz`` (``open_time_ms,open,high,low,close,volume``),
``binance-usdm/<SYMBOL>-funding.csv.gz`` (``funding_time_ms,funding_rate``, optional),
``alternative-me/fear-greed-daily.csv`` (optional), ``binance-spot/PAXGUSDT-<1h|4h>.csv.gz``
(optional). A file that exists but cannot be read as documented raises ``MalformedDataError``
naming it; a missing one ``DataUnavailableError``.

Frames are pandas DataFrames indexed by candle OPEN time in Unix ms (int64), with float64 columns
``open high low close volume``. ``resample`` builds coarser candles exactly: a bucket is emitted
only when every constituent candle is present, so a gap never fabricates a candle.
"""

from __future__ import annotations

import warnings
import zlib
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd

from core.clock import EARLIEST_TIME_MS, LATEST_TIME_MS, RECORDING_YEARS
from core.events import Candle
from market.data_file import open_data_csv
from market.guard import DEFAULT_MAX_PRICE
from market.timeframes import (
    BASE_INTERVAL_MS,
    RECORDED_INTERVALS,
    TIMEFRAME_MS,
    timeframe_ms,
    to_binance_symbol,
)

OHLCV_COLUMNS = ("open", "high", "low", "close", "volume")
KLINES_FOLDER = "binance-usdm"


def default_data_dir() -> Path:
    """The ``data/`` folder shipped beside the packages (also copied into the container image)."""
    return Path(__file__).resolve().parent.parent / "data"


class DataUnavailableError(LookupError):
    """The data dir has no such series."""


class MalformedDataError(ValueError):
    """A recorded file exists but is not in the documented format (the message names the file)."""


#: what reading a (gzip) CSV that is not as documented raises: pandas' parse errors are ValueErrors,
#: gzip names a bad header or CRC as an OSError, but a damaged deflate block is zlib's own error
CSV_READ_ERRORS = (ValueError, KeyError, OSError, EOFError, OverflowError, zlib.error)


def kline_path(ticker: str, interval: str, data_dir: Path | None = None) -> Path:
    symbol = to_binance_symbol(ticker)
    return (data_dir or default_data_dir()) / KLINES_FOLDER / f"{symbol}-{interval}.csv.gz"


def funding_path(ticker: str, data_dir: Path | None = None) -> Path:
    symbol = to_binance_symbol(ticker)
    return (data_dir or default_data_dir()) / KLINES_FOLDER / f"{symbol}-funding.csv.gz"


def fear_greed_path(data_dir: Path | None = None) -> Path:
    return (data_dir or default_data_dir()) / "alternative-me" / "fear-greed-daily.csv"


def load_klines(ticker: str, interval: str, data_dir: Path | None = None) -> pd.DataFrame:
    """Recorded USDⓈ-M klines for ``ticker`` (``BTC/USDT``) at ``interval`` (1m .. 15m or 1h)."""
    if interval not in RECORDED_INTERVALS:
        raise DataUnavailableError(
            f"recorded intervals are {RECORDED_INTERVALS}; resample for {interval!r}"
        )
    path = kline_path(ticker, interval, data_dir)
    _require_file(
        path,
        f"no recorded {interval} klines for {ticker}",
        "(coarser candles are built with resample from a finer recorded interval)",
    )
    return read_kline_file(path)


def read_kline_file(path: Path) -> pd.DataFrame:
    """One kline file of the documented layout, sorted by open time, checked."""
    frame = _read_csv(path, "open_time_ms", OHLCV_COLUMNS)
    _check_ohlcv(frame, path)
    return frame


def base_interval(tickers: Sequence[str], data_dir: Path | None = None) -> str:
    """The finest base bar (1m .. 15m) recorded for every ticker: what a replay runs on."""
    for interval in BASE_INTERVAL_MS:
        if all(kline_path(t, interval, data_dir).is_file() for t in tickers):
            return interval
    lacking = [
        t
        for t in tickers
        if not any(kline_path(t, i, data_dir).is_file() for i in BASE_INTERVAL_MS)
    ]
    named = lacking or list(tickers)  # or: no one base bar common to all of them
    expected = ", ".join(str(kline_path(t, "5m", data_dir)) for t in named)
    raise DataUnavailableError(
        f"no base klines (1m, 3m, 5m or 15m) for {', '.join(named)}"
        + ("" if lacking else " at one interval common to all")
        + f": expected e.g. {expected}"
    )


def load_spot_klines(symbol: str, interval: str, data_dir: Path | None = None) -> pd.DataFrame:
    """Recorded Binance SPOT klines of ``symbol`` (``PAXGUSDT``) at ``interval`` (1h or 4h)."""
    path = (data_dir or default_data_dir()) / "binance-spot" / f"{symbol}-{interval}.csv.gz"
    _require_file(path, f"no recorded spot {interval} klines for {symbol}")
    return read_kline_file(path)


def load_funding(ticker: str, data_dir: Path | None = None) -> pd.DataFrame:
    """Recorded funding: index ``funding_time_ms``, column ``funding_rate`` (per 8 h)."""
    path = funding_path(ticker, data_dir)
    _require_file(path, f"no recorded funding for {ticker}")
    frame = _read_csv(path, "funding_time_ms", ("funding_rate",))
    if not np.isfinite(frame["funding_rate"].to_numpy()).all():
        raise MalformedDataError(f"{path}: non-finite funding rates")
    _refuse_defects(
        frame.index.to_numpy(),
        [
            (_OUT_OF_RANGE, outside_recording_span(frame.index)),
            (_FUNDING_PAST_BOUND, funding_past_bound(frame["funding_rate"].to_numpy())),
        ],
        path,
    )
    return frame


def funding_past_bound(rates: np.ndarray) -> np.ndarray:
    """Where a funding rate is past ``FUNDING_RATE_MAX`` either way, which the live reader
    (``derivatives.binance``) refuses: replayed, the premiumIndex answer holding it was refused
    whole, every ticker's funding unavailable until the next settlement, no file named."""
    with np.errstate(invalid="ignore"):
        return np.asarray(np.abs(rates) > FUNDING_RATE_MAX)


def load_fear_greed(data_dir: Path | None = None) -> pd.DataFrame:
    """Daily Fear & Greed: index ``timestamp_s`` (00:00 UTC), columns ``value``, ``classification``."""
    path = fear_greed_path(data_dir)
    _require_file(path, "no recorded Fear & Greed")
    try:
        frame = _typed_csv(path, {"timestamp_s": np.int64, "value": np.int64})
        frame = frame.set_index("timestamp_s").sort_index()
    except CSV_READ_ERRORS as exc:
        raise MalformedDataError(f"{path}: not a Fear & Greed file ({_short(exc)})") from None
    if not {"value", "classification"} <= set(frame.columns) or frame.empty:
        raise MalformedDataError(f"{path}: expected timestamp_s,value,classification rows")
    # as data check reads it: a unit slip (ms for s) is the year 57,000, not a day to look up
    _refuse_defects(
        frame.index.to_numpy(),
        [
            (_OUT_OF_RANGE, outside_recording_span(frame.index, 1000)),
            (_FEAR_GREED_OFF_SCALE, fear_greed_off_scale(frame["value"].to_numpy())),
        ],
        path,
    )
    return frame


def fear_greed_off_scale(values: np.ndarray) -> np.ndarray:
    """Where a Fear & Greed value is off alternative.me's 0 .. 100 scale, which the live reader
    (``derivatives.web_sources``) refuses: replayed, the day's index was null, no reason said."""
    return np.asarray((values < 0) | (values > FEAR_GREED_MAX))


def _read_csv(path: Path, index: str, columns: Sequence[str]) -> pd.DataFrame:
    """``index`` + float ``columns`` from a (gzip) CSV; anything unreadable is MalformedDataError."""
    try:
        frame = _typed_csv(path, {index: np.int64, **dict.fromkeys(columns, np.float64)})
    except CSV_READ_ERRORS as exc:
        raise MalformedDataError(f"{path}: unreadable ({_short(exc)})") from None
    missing = [name for name in (index, *columns) if name not in frame.columns]
    if missing:
        raise MalformedDataError(
            f"{path}: missing column(s) {', '.join(missing)}; expected {index},{','.join(columns)}"
        )
    return frame.set_index(index)[list(columns)].sort_index()


def _require_file(path: Path, unavailable: str, hint: str = "") -> None:
    """``DataUnavailableError`` saying ``unavailable`` and why, unless ``path`` is a regular file:
    missing, or something else in its place (a directory, a FIFO, which a read would block on)."""
    if path.is_file():
        return
    why = "is not a regular file" if path.exists() else "missing"
    raise DataUnavailableError(f"{unavailable}: {path} {why}" + (f" {hint}" if hint else ""))


def _typed_csv(path: Path, dtypes: dict[str, type]) -> pd.DataFrame:
    """``pd.read_csv`` with ``dtypes``, without its RuntimeWarning: a blank int64 cell makes pandas
    warn of its NaN cast, then raise the ValueError the caller reports; the warning alone would
    reach the person's terminal."""
    with warnings.catch_warnings(), open_data_csv(path) as source:
        warnings.simplefilter("ignore", RuntimeWarning)
        return pd.read_csv(source, dtype=dtypes)


def _short(exc: BaseException, limit: int = 160) -> str:
    text = f"{type(exc).__name__}: {exc}".replace("\n", " ")
    return text if len(text) <= limit else text[:limit] + "..."


def to_candles(frame: pd.DataFrame) -> list[Candle]:
    """A frame of this module's shape as ``Candle`` messages, oldest first."""
    return [
        Candle(open_time_ms=int(t), open=o, high=h, low=lo, close=c, volume=v)
        for t, o, h, lo, c, v in frame[list(OHLCV_COLUMNS)].itertuples(index=True, name=None)
    ]


def interval_ms(interval: str) -> int:
    """A base bar's or a stream timeframe's length in ms (1m, 3m, 5m, 15m, 1h, 4h)."""
    known = BASE_INTERVAL_MS.get(interval)
    return known if known is not None else timeframe_ms(interval)


def resample(frame: pd.DataFrame, source_interval: str, target_interval: str) -> pd.DataFrame:
    """Aggregate complete buckets of ``source_interval`` candles into ``target_interval`` candles."""
    src_ms, dst_ms = interval_ms(source_interval), interval_ms(target_interval)
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
        raise MalformedDataError(f"{path}: non-finite values in recorded klines")
    if not frame.index.is_unique:
        raise MalformedDataError(f"{path}: duplicate candle open times")
    _refuse_defects(frame.index.to_numpy(), kline_defects(frame.index.to_numpy(), values), path)


_OUT_OF_RANGE = f"a time outside {RECORDING_YEARS} (seconds or microseconds read as ms?)"
FEAR_GREED_MAX = 100
#: a funding rate past 10 % an interval either way is no market's (Binance caps a contract's at a
#: few %); the live reader refuses it
FUNDING_RATE_MAX = 0.1
_FUNDING_PAST_BOUND = f"a rate outside {-FUNDING_RATE_MAX:g} .. {FUNDING_RATE_MAX:g}"
_FEAR_GREED_OFF_SCALE = f"a value outside 0 .. {FEAR_GREED_MAX}"


def outside_recording_span(stamps: pd.Index | np.ndarray, unit_ms: int = 1) -> np.ndarray:
    """Where a time counted in ``unit_ms`` (1: milliseconds) is outside ``RECORDING_YEARS``, or
    not a number. Compared in the time's own unit: multiplying a 20-digit cell first overflows."""
    stamps = np.asarray(stamps)
    with np.errstate(invalid="ignore"):
        inside = (stamps >= EARLIEST_TIME_MS // unit_ms) & (stamps < LATEST_TIME_MS // unit_ms)
    return np.asarray(~inside)


def kline_defects(times: np.ndarray, values: np.ndarray) -> list[tuple[str, np.ndarray]]:
    """Rows that cannot be a candle, by reason: ``(reason, row mask)`` for each reason found:
    ``candle_defects`` and a time outside ``RECORDING_YEARS``."""
    checks = _candle_checks(values)
    checks.insert(1, (_OUT_OF_RANGE, outside_recording_span(times)))
    return [(reason, mask) for reason, mask in checks if mask.any()]


def candle_defects(values: np.ndarray) -> list[tuple[str, np.ndarray]]:
    """``(reason, row mask)`` for each way rows of OHLCV ``values`` (the columns in order) cannot
    be a candle that traded: a bar whose high is under its low, or whose open or close lies
    outside them, a price <= 0, under 8 decimals or past the market guard's bound, or a volume no
    market trades, would otherwise be used as if it had traded."""
    return [(reason, mask) for reason, mask in _candle_checks(values) if mask.any()]


def _candle_checks(values: np.ndarray) -> list[tuple[str, np.ndarray]]:
    opens, highs, lows, closes, volumes = (values[:, i] for i in range(5))
    with np.errstate(invalid="ignore"):  # NaN compares False here; non-finite has its own reason
        checks = [
            ("a non-finite value", ~np.isfinite(values).all(axis=1)),
            ("a price <= 0", (values[:, :4] <= 0).any(axis=1)),
            (
                _PRICE_TOO_LOW,
                ((values[:, :4] > 0) & (values[:, :4] < MIN_CANDLE_PRICE)).any(axis=1),
            ),
            ("high below low, open or close", (highs < lows) | (highs < opens) | (highs < closes)),
            ("low above open or close", (lows > opens) | (lows > closes)),
            ("a negative volume", volumes < 0),
            (_PRICE_TOO_HIGH, (values[:, :4] > DEFAULT_MAX_PRICE).any(axis=1)),
            (_VOLUME_TOO_HIGH, volumes > MAX_CANDLE_VOLUME),
        ]
    return checks


#: the smallest price a kline can carry: Binance (and the simulator, as it) writes 8 decimals, so
#: a bar of 1e-9 reached the daemon as 0.00000000 and failed every fill and decision of a replay
MIN_CANDLE_PRICE = 1e-8
_PRICE_TOO_LOW = f"a price under {MIN_CANDLE_PRICE:g} (klines carry 8 decimals: it would read 0)"

#: the market guard's bound on a price: a candle past it would replay as ticks the live daemon
#: never lets through, its overflowing indicators leaving the ticker out of every snapshot
_PRICE_TOO_HIGH = f"a price above {DEFAULT_MAX_PRICE:g} (the market guard's bound)"
#: far more than any market trades in a bar; 1e308 summed into a 15m bar overflowed to infinity
MAX_CANDLE_VOLUME = 1e18
_VOLUME_TOO_HIGH = f"a volume above {MAX_CANDLE_VOLUME:g}"


def _refuse_defects(times: np.ndarray, defects: list[tuple[str, np.ndarray]], path: Path) -> None:
    for reason, mask in defects:
        if mask.any():
            first = int(times[mask][0])
            when = f" ({_iso(first)})" if EARLIEST_TIME_MS <= first < LATEST_TIME_MS else ""
            raise MalformedDataError(
                f"{path}: {int(mask.sum())} row(s) with {reason}, the first at time {first}{when}"
            )


def _iso(at_ms: int) -> str:
    return datetime.fromtimestamp(at_ms / 1000, UTC).strftime("%Y-%m-%d %H:%M UTC")


__all__ = [
    "BASE_INTERVAL_MS",
    "CSV_READ_ERRORS",
    "EARLIEST_TIME_MS",
    "FUNDING_RATE_MAX",
    "KLINES_FOLDER",
    "LATEST_TIME_MS",
    "OHLCV_COLUMNS",
    "RECORDED_INTERVALS",
    "RECORDING_YEARS",
    "TIMEFRAME_MS",
    "DataUnavailableError",
    "MalformedDataError",
    "base_interval",
    "candle_defects",
    "default_data_dir",
    "fear_greed_off_scale",
    "fear_greed_path",
    "funding_past_bound",
    "funding_path",
    "interval_ms",
    "kline_defects",
    "kline_path",
    "load_fear_greed",
    "load_funding",
    "load_klines",
    "outside_recording_span",
    "read_kline_file",
    "resample",
    "to_candles",
]
