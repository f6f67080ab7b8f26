"""Binance public data-archive kline files -> frames of the documented layout.

Binance's archive (``data/futures/um/{daily,monthly}/klines/<SYMBOL>/<interval>/``) ships one zip
per day or month holding one CSV named like the zip (``BTCUSDT-5m-2025-03.csv``). Its columns:
``open_time, open, high, low, close, volume, close_time, quote_volume, count, taker_buy_volume,
taker_buy_quote_volume, ignore``. Older files have no header row; newer ones do. Since 2025 the SPOT
archive writes open times in MICROseconds; USDⓈ-M in milliseconds. Everything is read here:

- a header row is recognised by its first cell not being a number;
- timestamps >= 1e14 are microseconds (1e14 ms is the year 5138) and are divided by 1000;
- symbol and interval come from the file name (``<SYMBOL>-<interval>-<date>.csv|zip``).

Only ``open_time_ms,open,high,low,close,volume`` are kept (the layout replay reads).
"""

from __future__ import annotations

import io
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from market.recorded import OHLCV_COLUMNS, RECORDED_INTERVALS, MalformedDataError
from market.timeframes import from_binance_symbol

#: open times at or above this are microseconds (as milliseconds it is the year 5138)
MICROSECONDS_FROM = 10**14
_NAME = re.compile(r"^(?P<symbol>[A-Z0-9]+)-(?P<interval>\d+[mhdw])-(?P<date>[\d-]+)$")
_ARCHIVE_COLUMNS = 6  # open_time + OHLCV are the first six of the archive's twelve


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
        if path.suffix == ".zip":
            with zipfile.ZipFile(path) as archive:
                members = [n for n in archive.namelist() if n.endswith(".csv")]
                if len(members) != 1:
                    raise MalformedDataError(f"{path}: expected one CSV inside, found {members}")
                text = archive.read(members[0]).decode("utf-8")
        else:
            text = path.read_text(encoding="utf-8")
    except (OSError, zipfile.BadZipFile, UnicodeDecodeError) as exc:
        raise MalformedDataError(f"{path}: unreadable ({type(exc).__name__}: {exc})") from None
    return ArchiveKlines(ticker, interval, path, parse_archive_csv(text, path))


def parse_archive_csv(text: str, path: Path) -> pd.DataFrame:
    lines = text.lstrip("\ufeff").splitlines()
    first = lines[0].split(",", 1)[0].strip() if lines else ""
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
    if not np.isfinite(values).all():
        raise MalformedDataError(f"{path}: non-finite values")
    opens = values[:, 0].astype(np.int64)
    opens = np.where(opens >= MICROSECONDS_FROM, opens // 1000, opens)
    frame = pd.DataFrame(
        values[:, 1:], index=pd.Index(opens, name="open_time_ms"), columns=list(OHLCV_COLUMNS)
    )
    return frame


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


__all__ = ["MICROSECONDS_FROM", "ArchiveKlines", "parse_archive_name", "read_archive_file"]
