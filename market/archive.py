"""Binance public data-archive kline files -> frames of the documented layout.

Binance's archive (``data/futures/um/{daily,monthly}/klines/<SYMBOL>/<interval>/``) ships one zip
per day or month holding one CSV named like the zip (``BTCUSDT-5m-2025-03.csv``). Its columns:
``open_time, open, high, low, close, volume, close_time, quote_volume, count, taker_buy_volume,
taker_buy_quote_volume, ignore``. Older files have no header row; newer ones do. Since 2025 the SPOT
archive writes open times in MICROseconds; USDⓈ-M in milliseconds. Everything is read here:

- a header row is recognised by its first cell not being a number;
- timestamps >= 1e14 are microseconds (1e14 ms is the year 5138) and are divided by 1000;
- symbol and interval come from the file name (``<SYMBOL>-<interval>-<date>.csv|zip``).

A file is refused whole (``MalformedDataError`` naming it; nothing is written) when it holds no
rows, a time that is not a whole millisecond within 2010 .. 2100 or not on the interval's grid, or a
bar that cannot have traded (``market.recorded.kline_defects``). A CSV, or a zip's member, larger
than ``MAX_CSV_BYTES`` is refused before it is read: a month of 1m bars is about 4 MiB, and a small
zip can inflate to gigabytes.

Only ``open_time_ms,open,high,low,close,volume`` are kept (the layout replay reads).
"""

from __future__ import annotations

import io
import re
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from market.recorded import (
    OHLCV_COLUMNS,
    RECORDED_INTERVALS,
    RECORDING_YEARS,
    MalformedDataError,
    interval_ms,
    kline_defects,
    outside_recording_span,
)
from market.timeframes import from_binance_symbol

#: open times at or above this are microseconds (as milliseconds it is the year 5138)
MICROSECONDS_FROM = 10**14
_NAME = re.compile(r"^(?P<symbol>[A-Z0-9]+)-(?P<interval>\d+[mhdw])-(?P<date>[\d-]+)$")
_ARCHIVE_COLUMNS = 6  # open_time + OHLCV are the first six of the archive's twelve
#: what reading a damaged file raises: zipfile leaves a corrupt deflate stream's zlib.error, a
#: member needing a password (RuntimeError) and an unknown compression method (NotImplementedError)
#: to the caller
_UNREADABLE = (
    OSError,
    EOFError,
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    zlib.error,
    RuntimeError,
    NotImplementedError,
    UnicodeDecodeError,
)
#: the largest CSV read (a month of 1m bars is about 4 MiB; a day of 1s bars about 8 MiB)
MAX_CSV_BYTES = 256 * 1024 * 1024
_NAMES_SHOWN = 3


@dataclass(frozen=True)
class ArchiveKlines:
    ticker: str  # BTC/USDT
    interval: str  # 5m
    source: Path
    frame: pd.DataFrame  # index open_time_ms, columns OHLCV


def parse_archive_name(path: Path) -> tuple[str, str]:
    """(ticker, interval) from ``BTCUSDT-5m-2025-03-01.zip`` / ``.csv``."""
    stem = path.name.removesuffix(".zip").removesuffix(".csv")
    match = _NAME.match(stem)
    if match is None:
        raise MalformedDataError(
            f"{path}: not a Binance archive kline file name (SYMBOL-interval-date.csv|zip)"
        )
    interval = match["interval"]
    if interval not in RECORDED_INTERVALS:
        raise MalformedDataError(
            f"{path}: {interval} klines; importable intervals are {', '.join(RECORDED_INTERVALS)}"
        )
    try:
        ticker = from_binance_symbol(match["symbol"])
    except ValueError as exc:
        raise MalformedDataError(f"{path}: {exc}") from None
    return ticker, interval


def read_archive_file(path: Path) -> ArchiveKlines:
    """One archive file (zip or CSV, with or without a header, ms or us timestamps)."""
    ticker, interval = parse_archive_name(path)
    try:
        data = _read_zip_member(path) if path.suffix == ".zip" else _read_bounded(path)
        text = data.decode("utf-8")
    except _UNREADABLE as exc:
        raise MalformedDataError(f"{path}: unreadable ({type(exc).__name__}: {exc})") from None
    frame = parse_archive_csv(text, path)
    _check_bars(frame, interval, path)
    return ArchiveKlines(ticker, interval, path, frame)


def _read_bounded(path: Path) -> bytes:
    with path.open("rb") as handle:
        data = handle.read(MAX_CSV_BYTES + 1)
    if len(data) > MAX_CSV_BYTES:
        raise MalformedDataError(f"{path}: over {MAX_CSV_BYTES // 2**20} MiB, not a kline file")
    return data


def _read_zip_member(path: Path) -> bytes:
    with zipfile.ZipFile(path) as archive:
        members = [i for i in archive.infolist() if i.filename.endswith(".csv") and not i.is_dir()]
        if len(members) != 1:
            # the names are anyone's text, and may be millions: a few, quoted (repr escapes them)
            names = ", ".join(repr(i.filename) for i in members[:_NAMES_SHOWN])
            more = ", ..." if len(members) > _NAMES_SHOWN else ""
            raise MalformedDataError(
                f"{path}: expected one CSV inside, found {len(members):,} CSV members: "
                f"[{names}{more}]"
            )
        member = members[0]
        too_big = f"{path}: {member.filename!r} inflates to over {MAX_CSV_BYTES // 2**20} MiB"
        if member.file_size > MAX_CSV_BYTES:
            raise MalformedDataError(too_big)
        # the declared size may lie: read no more than the limit whatever it says
        with archive.open(member) as handle:
            data = handle.read(MAX_CSV_BYTES + 1)
    if len(data) > MAX_CSV_BYTES:
        raise MalformedDataError(too_big)
    return data


def parse_archive_csv(text: str, path: Path) -> pd.DataFrame:
    lines = text.lstrip("\ufeff").splitlines()
    first = lines[0].split(",", 1)[0].strip().strip('"') if lines else ""
    header = 0 if first and not _is_number(first) else None
    try:
        raw = pd.read_csv(
            io.StringIO("\n".join(lines)),
            header=header,
            usecols=range(_ARCHIVE_COLUMNS),
            dtype=np.float64,
        )
    except (ValueError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise MalformedDataError(f"{path}: not archive kline rows ({exc})") from None
    values = raw.to_numpy(dtype=np.float64)
    if not len(values):
        raise MalformedDataError(f"{path}: no kline rows")
    opens = _open_times_ms(values[:, 0], path)
    return pd.DataFrame(
        values[:, 1:], index=pd.Index(opens, name="open_time_ms"), columns=list(OHLCV_COLUMNS)
    )


def _open_times_ms(stamps: np.ndarray, path: Path) -> np.ndarray:
    """Whole milliseconds within 2010 .. 2100, checked as floats: a cast of 1e22 or NaN to int64
    gives an arbitrary time, and a fraction would be cut off unseen."""
    with np.errstate(invalid="ignore"):
        millis = np.where(stamps >= MICROSECONDS_FROM, stamps / 1000, stamps)
        bad = ~np.isfinite(millis) | (millis != np.floor(millis))
        bad |= outside_recording_span(millis)
    if bad.any():
        raise MalformedDataError(
            f"{path}: {int(bad.sum())} open time(s) not a whole millisecond within "
            f"{RECORDING_YEARS}, "
            f"the first {float(stamps[bad][0])!r}"
        )
    return millis.astype(np.int64)


def _check_bars(frame: pd.DataFrame, interval: str, path: Path) -> None:
    times = frame.index.to_numpy()
    step_ms = interval_ms(interval)
    off_grid = times % step_ms != 0
    if off_grid.any():
        raise MalformedDataError(
            f"{path}: {int(off_grid.sum())} open time(s) off the {interval} grid, "
            f"the first {int(times[off_grid][0])} (is the interval in the name right?)"
        )
    for reason, mask in kline_defects(times, frame.to_numpy()):
        raise MalformedDataError(
            f"{path}: {int(mask.sum())} row(s) with {reason}, the first at {int(times[mask][0])}"
        )


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


__all__ = [
    "MAX_CSV_BYTES",
    "MICROSECONDS_FROM",
    "ArchiveKlines",
    "parse_archive_name",
    "read_archive_file",
]
