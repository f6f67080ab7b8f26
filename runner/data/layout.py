"""Writing the documented data-dir layout (``market.recorded`` reads it).

Files are written whole to a temporary name and renamed, so a reader (or a killed import) never sees
half a file. Rows merged into an existing file replace rows with the same time (newest wins) and the
result is sorted: importing overlapping archives (a month and one of its days) gives one row each.
A bar given different values (two archives that disagree, a revised one over the stored file) is
counted, for ``data import`` to say; the newest still wins.
An existing file that cannot be read as the layout says (or a FIFO or directory in its place) is
refused with ``MalformedDataError`` naming it and left as it is, never merged into or replaced.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from market.data_file import open_data_csv
from market.recorded import (
    CSV_READ_ERRORS,
    OHLCV_COLUMNS,
    MalformedDataError,
    funding_path,
    kline_path,
    read_kline_file,
)


def merge_rows(old: pd.DataFrame | None, new: pd.DataFrame) -> pd.DataFrame:
    """``new`` over ``old`` (same index name and columns), newest row per time, sorted."""
    frame = new if old is None or old.empty else pd.concat([old, new])
    frame = frame[~frame.index.duplicated(keep="last")]
    return frame.sort_index()


def write_csv_gz(frame: pd.DataFrame, path: Path) -> None:
    """Atomically write ``frame`` (index column first) as a gzip CSV; floats round-trip exactly."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    try:
        # a stale one, or a link someone left: created afresh ("x"), never written through a link
        tmp.unlink(missing_ok=True)
        with tmp.open("xb") as handle:
            frame.to_csv(handle, compression={"method": "gzip", "mtime": 0}, float_format=None)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def read_existing(path: Path, index: str) -> pd.DataFrame | None:
    """The stored rows to merge into, or None when there is no file yet."""
    if not os.path.lexists(path):
        return None
    if not path.is_file():
        raise MalformedDataError(f"{path}: exists but is not a regular file; move it aside")
    if index == "open_time_ms":  # klines: checked as replay reads them, bad bars included
        return read_kline_file(path)
    try:
        with open_data_csv(path) as source:
            return pd.read_csv(source, dtype={index: "int64"}).set_index(index)
    except CSV_READ_ERRORS as exc:
        raise MalformedDataError(
            f"{path}: the stored file cannot be read to merge into ({type(exc).__name__}: {exc})"
        ) from None


@dataclass(frozen=True)
class StoredKlines:
    """What ``store_klines`` wrote: the file, its bars, and the bars that had more than one value
    (open times, sorted): in the frame given (its last row kept) and in the stored file (the
    frame's row kept). A time repeated with the same values (overlapping archives) is neither."""

    path: Path
    bars: int
    differing_ms: tuple[int, ...]
    replaced_ms: tuple[int, ...]


def store_klines(frame: pd.DataFrame, ticker: str, interval: str, out_dir: Path) -> StoredKlines:
    """Merge ``frame`` (index open_time_ms, OHLCV) into ``out_dir``'s file of ticker/interval."""
    path = kline_path(ticker, interval, out_dir)
    frame = frame[list(OHLCV_COLUMNS)]
    frame.index.name = "open_time_ms"
    differing = differing_times(frame)
    frame = frame[~frame.index.duplicated(keep="last")]
    old = read_existing(path, "open_time_ms")
    replaced = () if old is None or old.empty else differing_times(pd.concat([old, frame]))
    merged = merge_rows(old, frame)
    write_csv_gz(merged, path)
    return StoredKlines(path, len(merged), differing, replaced)


def differing_times(frame: pd.DataFrame) -> tuple[int, ...]:
    """The index values ``frame`` holds more than one distinct row for, sorted."""
    repeated = frame[frame.index.duplicated(keep=False)]
    if repeated.empty:
        return ()
    distinct = repeated.reset_index().drop_duplicates()  # NaN equals NaN here, as it should
    times = distinct.iloc[:, 0]
    return tuple(sorted(int(t) for t in times[times.duplicated()].unique()))


def store_funding(frame: pd.DataFrame, ticker: str, out_dir: Path) -> Path:
    """Merge ``frame`` (index funding_time_ms, column funding_rate) into the ticker's file."""
    path = funding_path(ticker, out_dir)
    frame = frame[["funding_rate"]]
    frame.index.name = "funding_time_ms"
    write_csv_gz(merge_rows(read_existing(path, "funding_time_ms"), frame), path)
    return path


__all__ = [
    "StoredKlines",
    "differing_times",
    "merge_rows",
    "read_existing",
    "store_funding",
    "store_klines",
    "write_csv_gz",
]
