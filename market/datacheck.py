"""``vigil data check``: what a data dir holds, per file: span, rows, gaps, duplicates, misaligned.

Reads every file raw (no refusal on the first defect, unlike ``market.recorded``'s loaders) so a
user sees all the problems at once. A kline file's bar length comes from its name
(``BTCUSDT-5m.csv.gz``); funding is expected every 8 h, Fear & Greed daily. Gaps and misaligned bars
are listed (the first ``MAX_LISTED`` of each) with their total counts.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from core.clock import DAY_MS
from market.data_file import open_data_csv
from market.recorded import (
    CSV_READ_ERRORS,
    FEAR_GREED_MAX,
    FUNDING_RATE_MAX,
    OHLCV_COLUMNS,
    RECORDING_YEARS,
    fear_greed_off_scale,
    funding_past_bound,
    interval_ms,
    kline_defects,
    outside_recording_span,
)

MAX_LISTED = 20
FUNDING_STEP_MS = 8 * 3_600_000


@dataclass(frozen=True)
class Gap:
    after: str  # the last bar before the hole (UTC)
    before: str  # the first bar after it
    missing: int  # bars missing


@dataclass
class FileCheck:
    path: str
    kind: str  # klines <interval> | funding | fear_greed
    rows: int = 0
    first: str | None = None
    last: str | None = None
    gaps: list[Gap] = field(default_factory=list)
    gap_count: int = 0
    missing_bars: int = 0
    duplicates: list[str] = field(default_factory=list)
    duplicate_count: int = 0
    misaligned: list[str] = field(default_factory=list)
    misaligned_count: int = 0
    #: rows replay refuses (a bar that cannot have traded, a non-finite rate): reason, count, first
    bad_rows: list[str] = field(default_factory=list)
    error: str | None = None  # unreadable: why

    @property
    def ok(self) -> bool:
        return self.error is None and not (
            self.gap_count or self.duplicate_count or self.misaligned_count or self.bad_rows
        )

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


def check_data_dir(data_dir: Path) -> list[FileCheck]:
    """Every recorded file of the documented layout under ``data_dir``, sorted by path."""
    checks = []
    for path in sorted(data_dir.glob("binance-*/*.csv.gz")):
        name = path.name.removesuffix(".csv.gz")
        _symbol, _, suffix = name.partition("-")
        if suffix == "funding":
            checks.append(check_series(path, "funding_time_ms", FUNDING_STEP_MS, "funding"))
        else:
            try:
                step_ms = interval_ms(suffix)
            except ValueError:
                checks.append(FileCheck(str(path), "unknown", error=f"unknown interval {suffix!r}"))
                continue
            checks.append(check_series(path, "open_time_ms", step_ms, f"klines {suffix}"))
    fng = data_dir / "alternative-me" / "fear-greed-daily.csv"
    if fng.is_file():
        checks.append(check_series(fng, "timestamp_s", DAY_MS, "fear_greed", unit_ms=1000))
    return checks


def check_series(
    path: Path, time_column: str, step_ms: int, kind: str, *, unit_ms: int = 1
) -> FileCheck:
    check = FileCheck(str(path), kind)
    try:
        frame = _read(path)
        times = _times(frame, time_column, unit_ms)
        check.bad_rows = _bad_rows(frame, times, kind)
    except _Unreadable as exc:
        check.error = str(exc)
        return check
    check.rows = len(times)
    if not check.rows:
        check.error = "no rows"
        return check
    times = np.sort(times)
    check.first, check.last = _iso(int(times[0])), _iso(int(times[-1]))
    # Binance stamps funding a few ms after the hour at times: only kline bars must sit on the grid
    off_grid = times[:0] if kind == "funding" else times[times % step_ms != 0]
    check.misaligned_count = len(off_grid)
    check.misaligned = [_iso(int(t)) for t in off_grid[:MAX_LISTED]]
    repeated = np.unique(times[1:][np.diff(times) == 0])
    check.duplicate_count = len(repeated)
    check.duplicates = [_iso(int(t)) for t in repeated[:MAX_LISTED]]
    distinct = np.unique(times)
    steps = np.diff(distinct)
    # funding settles near, not exactly on, 00/08/16 UTC: a gap is a whole missing step or more
    holes = np.flatnonzero(steps >= 2 * step_ms if kind == "funding" else steps > step_ms)
    check.gap_count = len(holes)
    check.missing_bars = int(sum(int(steps[i]) // step_ms - 1 for i in holes))
    check.gaps = [
        Gap(_iso(int(distinct[i])), _iso(int(distinct[i + 1])), int(steps[i]) // step_ms - 1)
        for i in holes[:MAX_LISTED]
    ]
    return check


class _Unreadable(Exception):
    """Why a file cannot be checked at all (its message is the report's ERROR text)."""


def _read(path: Path) -> pd.DataFrame:
    # a FIFO would block the check until someone writes to it; a directory or a dangling link
    # is named for what it is rather than as a read error
    if not path.is_file():
        raise _Unreadable("not a regular file (a directory, a FIFO or a dangling link?)")
    try:
        with open_data_csv(path) as source:
            return pd.read_csv(source)
    except CSV_READ_ERRORS as exc:
        raise _Unreadable(f"unreadable: {type(exc).__name__}: {exc}") from None


def _times(frame: pd.DataFrame, column: str, unit_ms: int) -> np.ndarray:
    """The time column in ms, or why it is none: a fraction, a blank, a 20-digit number, or a time
    outside RECORDING_YEARS (checked before anything formats one: the year 10000 has no date)."""
    stamps = _whole_numbers(frame, column)
    outside = outside_recording_span(stamps, unit_ms)
    if outside.any():
        raise _Unreadable(
            f"{int(outside.sum())} time(s) outside {RECORDING_YEARS}, "
            f"the first {int(stamps[outside][0])}"
            " (seconds or microseconds taken for milliseconds?)"
        )
    return stamps * unit_ms


def _whole_numbers(frame: pd.DataFrame, column: str) -> np.ndarray:
    if column not in frame.columns:
        raise _Unreadable(f"no {column} column; columns: {', '.join(map(str, frame.columns))}")
    values = frame[column]
    if values.empty:  # a header alone: reported as "no rows"
        return np.empty(0, dtype=np.int64)
    if values.dtype != np.int64:  # read_csv makes int64 only when every cell is a whole number
        # the first cell that is none: one such row makes the whole column float (or text), and
        # the first row, a good one, was quoted as the bad one
        odd = next((v for v in values if not _reads_as_int64(v)), values.iloc[0])
        raise _Unreadable(f"{column}: {odd!r} is not a whole number")
    return values.to_numpy(dtype=np.int64)


def _reads_as_int64(value: object) -> bool:
    """``value`` as read_csv hands a cell of a column that is not all int64: an int, a float
    (whole and finite, as a good cell of a float column is) or a text of ASCII digits."""
    if isinstance(value, float | np.floating):
        value = int(value) if math.isfinite(value) and float(value).is_integer() else None
    elif isinstance(value, str):
        digits = value.strip()
        value = int(digits) if digits.removeprefix("-").isdigit() and digits.isascii() else None
    return isinstance(value, int | np.integer) and -(2**63) <= int(value) < 2**63


def _bad_rows(frame: pd.DataFrame, times: np.ndarray, kind: str) -> list[str]:
    """What replay would refuse row by row, each reason with its count and first row."""
    if kind == "fear_greed":  # replay reads value as whole numbers beside a classification
        off_scale = fear_greed_off_scale(_whole_numbers(frame, "value"))
        if "classification" not in frame.columns:
            raise _Unreadable("no classification column")
        if not off_scale.any():
            return []
        first = _iso(int(times[off_scale][0]))
        return [
            f"{int(off_scale.sum())} with a value outside 0 .. {FEAR_GREED_MAX}, the first {first}"
        ]
    columns = ["funding_rate"] if kind == "funding" else list(OHLCV_COLUMNS)
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise _Unreadable(f"missing column(s) {', '.join(missing)}")
    try:
        values = frame[columns].to_numpy(dtype=np.float64)
    except (ValueError, TypeError) as exc:
        raise _Unreadable(f"not numbers in {', '.join(columns)}: {exc}") from None
    if kind == "funding":
        defects = [
            ("a non-finite rate", ~np.isfinite(values).all(axis=1)),
            (f"a rate outside {-FUNDING_RATE_MAX:g} .. {FUNDING_RATE_MAX:g}",
             funding_past_bound(values[:, 0])),
        ]  # fmt: skip
    else:
        defects = kline_defects(times, values)
    return [
        f"{int(mask.sum())} with {reason}, the first {_iso(int(times[mask][0]))}"
        for reason, mask in defects
        if mask.any()
    ]


def _iso(at_ms: int) -> str:
    return datetime.fromtimestamp(at_ms / 1000, UTC).strftime("%Y-%m-%d %H:%M")


__all__ = ["FileCheck", "Gap", "check_data_dir", "check_series"]
