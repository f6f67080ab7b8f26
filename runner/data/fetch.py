"""``vigil data fetch``: klines and funding through ccxt into a data dir, page by page, resumable.

Each (ticker, series) is downloaded oldest first in pages of ``OHLCV_PAGE_LIMIT`` candles (funding:
``FUNDING_PAGE_LIMIT`` settlements). Every page is appended to ``<out>/.partial/<file>.csv`` and
flushed before the next request, so a killed fetch resumes after the last stored row; when a series
is complete its rows are merged into the documented ``.csv.gz`` and the partial file removed. A
series whose stored file already covers the span is skipped. Rate limiting is ccxt's own
(``enableRateLimit``: Binance's request weight budget) plus ``min_interval_secs`` between pages;
transient failures are retried by ``market.ccxt_client.call_with_retries`` on the clock.

Only closed candles are stored: the span is clamped to what has closed by the exchange's now. A row
the exchange garbled (a time that is not a whole number; a candle with a missing value or that
cannot have traded, as ``market.history.rows_to_frame`` drops them; a funding rate that is not a
finite number) is dropped with a warning and counted in the result, never stored: ``vigil data
check`` then shows the gap it leaves.
"""

from __future__ import annotations

import csv
import functools
import io
import logging
import math
import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import pandas as pd

from core.clock import Clock, is_recording_time
from market.ccxt_client import (
    OHLCV_PAGE_LIMIT,
    RetryPolicy,
    call_with_retries,
    retry_after_secs,
    to_ccxt_symbol,
)
from market.data_file import DATA_FILE_MAX_BYTES
from market.datacheck import FUNDING_STEP_MS
from market.history import on_grid, rows_to_frame
from market.recorded import (
    FUNDING_RATE_MAX,
    OHLCV_COLUMNS,
    MalformedDataError,
    funding_path,
    interval_ms,
    kline_path,
)
from runner.data.layout import read_existing, store_funding, store_klines
from runner.data.stored_rows import (
    FUNDING_MIN_GAP_MS,
    not_stored_bars,
    not_stored_settlements,
)
from core.regular_file import read_regular_file

log = logging.getLogger(__name__)

FUNDING_PAGE_LIMIT = 1000
PARTIAL_DIR = ".partial"
DEFAULT_RETRY = RetryPolicy(max_attempts=6, base_secs=1.0, cap_secs=60.0, jitter_fraction=0.5)


@dataclass(frozen=True)
class FetchRequest:
    tickers: tuple[str, ...]
    interval: str
    start_ms: int  # first open time wanted
    end_ms: int  # exclusive
    out_dir: Path
    funding: bool = True
    min_interval_secs: float = 0.0  # extra pause between pages, on top of ccxt's limiter


@dataclass(frozen=True)
class SeriesResult:
    name: str  # the file written
    rows: int  # rows fetched this run
    resumed_from_rows: int  # rows already in the partial file at start
    skipped: bool  # the stored file already covered the span
    dropped: int = 0  # rows the exchange sent that cannot be stored (garbled), this run


class _Partial:
    """Append-only CSV of fetched rows: the resume point of a series."""

    def __init__(self, path: Path, header: Sequence[str]) -> None:
        self.path = path
        self.header = list(header)
        self.rows = _read_partial(path, self.header)
        self._handle: TextIO | None = None

    def resume_ms(self, start_ms: int, step_ms: int, lead_ms: int) -> int:
        """Where the fetch goes on: after the last row when the rows reach back to the span's
        start (within ``lead_ms``: funding settles a little after the day starts), else from the
        start, the rows kept: a killed fetch of a later span left them, and going on after them
        left the days before them out."""
        if not self.rows or min(int(row[0]) for row in self.rows) >= start_ms + lead_ms:
            return start_ms
        return int(self.rows[-1][0]) + step_ms

    def append(self, rows: Sequence[Sequence[Any]]) -> None:
        if self._handle is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fresh = not self.path.is_file()
            self._handle = self.path.open("a", newline="")
            if fresh:
                csv.writer(self._handle).writerow(self.header)
            else:  # rewrite whole rows only: a kill may have cut the last line
                self._handle.close()
                self._rewrite()
                self._handle = self.path.open("a", newline="")
        text = [[str(v) for v in row] for row in rows]
        csv.writer(self._handle).writerows(text)
        self._handle.flush()
        self.rows.extend(text)

    def _rewrite(self) -> None:
        with self.path.open("w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(self.header)
            writer.writerows(self.rows)

    def frame(self, index: str) -> pd.DataFrame:
        frame = pd.DataFrame(self.rows, columns=self.header)
        frame[index] = frame[index].astype("int64")
        for column in self.header[1:]:
            frame[column] = frame[column].astype("float64")
        return frame.set_index(index)

    def close_and_remove(self) -> None:
        if self._handle is not None:
            self._handle.close()
        self.path.unlink(missing_ok=True)


class Fetcher:
    """Runs a ``FetchRequest`` against a ccxt ``binanceusdm`` (live, or the simulator's REST)."""

    def __init__(
        self,
        exchange: Any,
        clock: Clock,
        *,
        retry: RetryPolicy = DEFAULT_RETRY,
        progress: Callable[[str], None] = lambda _line: None,
    ) -> None:
        self._exchange = exchange
        self._clock = clock
        self._retry = retry
        self._progress = progress

    async def run(self, request: FetchRequest) -> list[SeriesResult]:
        results = []
        for ticker in request.tickers:
            results.append(await self.klines(request, ticker))
            if request.funding:
                results.append(await self.funding(request, ticker))
        return results

    async def klines(self, request: FetchRequest, ticker: str) -> SeriesResult:
        step_ms = interval_ms(request.interval)
        final = kline_path(ticker, request.interval, request.out_dir)
        last_open_ms = min(request.end_ms, self._clock.now_ms()) - step_ms
        last_open_ms -= last_open_ms % step_ms
        if _covers(final, "open_time_ms", request.start_ms, last_open_ms, step_ms):
            return SeriesResult(final.name, 0, 0, skipped=True)
        partial = _Partial(_partial_path(final), ("open_time_ms", *OHLCV_COLUMNS))
        resumed = len(partial.rows)
        since = partial.resume_ms(request.start_ms, step_ms, step_ms)
        fetched = dropped = 0
        symbol = to_ccxt_symbol(ticker)
        # a fetch of a later span left these: pages from the start cover them again
        stored = {int(row[0]): [float(v) for v in row[1:]] for row in partial.rows}
        while since <= last_open_ms:
            page = await self._call(
                functools.partial(
                    self._exchange.fetch_ohlcv,
                    symbol,
                    request.interval,
                    since=since,
                    limit=OHLCV_PAGE_LIMIT,
                    params={"until": last_open_ms},
                ),
                f"fetch_ohlcv {ticker} {request.interval} since {since}",
            )
            timed = [(at, row) for row in page if (at := _whole_ms(row[0])) is not None]
            rows = [[at, *row[1:6]] for at, row in timed if since <= at <= last_open_ms]
            dropped += len(page) - len(timed)
            if not rows:
                break
            # those that can be candles; the others logged
            candles = rows_to_frame(
                on_grid(rows, step_ms, ticker, request.interval), f"{ticker} {request.interval}"
            )
            dropped += len(rows) - len(candles)
            bars = zip(candles.index.tolist(), candles.to_numpy().tolist(), strict=True)
            new = not_stored_bars(bars, stored, f"{ticker} {request.interval}", partial.path)
            partial.append([[at, *values] for at, values in new])
            fetched += len(new)
            since = (int(rows[-1][0]) // step_ms + 1) * step_ms  # after an off-grid row too
            self._progress(f"{final.name}: {len(partial.rows):,} rows, up to {since} ms")
            # a page shorter than asked is not the end (an exchange may cap its pages lower): only
            # an empty one is. Every page with a row moves ``since`` a bar on, so this ends
            await self._pause(request)
        if partial.rows:
            store_klines(partial.frame("open_time_ms"), ticker, request.interval, request.out_dir)
        partial.close_and_remove()
        return SeriesResult(final.name, fetched, resumed, skipped=False, dropped=dropped)

    async def funding(self, request: FetchRequest, ticker: str) -> SeriesResult:
        final = funding_path(ticker, request.out_dir)
        until_ms = min(request.end_ms, self._clock.now_ms()) - 1
        partial = _Partial(_partial_path(final), ("funding_time_ms", "funding_rate"))
        resumed = len(partial.rows)
        since = partial.resume_ms(request.start_ms, 1, FUNDING_STEP_MS)
        fetched = dropped = 0
        symbol = to_ccxt_symbol(ticker)
        # the last settlement kept: a resumed fetch goes on after the stored rows, whose last one
        # the 30-minute rule holds its first new row to, as a fresh fetch's run of pages does
        last_ms = int(partial.rows[-1][0]) if partial.rows and since > request.start_ms else None
        # a fetch of a later span left these: pages from the start cover them again
        stored = {int(row[0]): float(row[1]) for row in partial.rows}
        while since <= until_ms:
            page = await self._call(
                functools.partial(
                    self._exchange.fetch_funding_rate_history,
                    symbol,
                    since=since,
                    limit=FUNDING_PAGE_LIMIT,
                    params={"until": until_ms},
                ),
                f"fetch_funding_rate_history {ticker} since {since}",
            )
            timed = [
                (at, item) for item in page if (at := _whole_ms(item.get("timestamp"))) is not None
            ]
            in_span = [(at, item) for at, item in timed if since <= at <= until_ms]
            if not in_span:
                break
            settled = _settlements(in_span, last_ms)
            rows = [(at, rate) for at, item in settled if (rate := _rate(item)) is not None]
            dropped += len(page) - len(timed) + len(in_span) - len(rows)
            if len(settled) < len(in_span):
                log.warning(
                    "%s funding: dropped %d settlement(s) within %d min of the one before",
                    ticker,
                    len(in_span) - len(settled),
                    FUNDING_MIN_GAP_MS // 60_000,
                )
            if len(rows) < len(settled):
                log.warning(
                    "%s funding: dropped %d rate(s) that are not finite numbers within +/- %g",
                    ticker,
                    len(settled) - len(rows),
                    FUNDING_RATE_MAX,
                )
            rows = not_stored_settlements(rows, stored, f"{ticker} funding", partial.path)
            partial.append(rows)
            fetched += len(rows)
            last_ms = settled[-1][0] if settled else last_ms
            since = max(at for at, _ in in_span) + 1
            # a full page goes on only when at least half of it are settlements: one repeating
            # the requested start, or rows a millisecond apart, moved ``since`` a few ms a page (a
            # day was 86 million requests); 500 settlements move it on by 10 days at least
            if len(page) < FUNDING_PAGE_LIMIT or 2 * len(settled) < FUNDING_PAGE_LIMIT:
                break
            await self._pause(request)
        if partial.rows:
            store_funding(partial.frame("funding_time_ms"), ticker, request.out_dir)
        partial.close_and_remove()
        return SeriesResult(final.name, fetched, resumed, skipped=False, dropped=dropped)

    async def _call(self, call: Callable[[], Awaitable[Any]], what: str) -> Any:
        return await call_with_retries(
            self._clock,
            call,
            what=what,
            policy=self._retry,
            retry_after=lambda: retry_after_secs(self._exchange),
        )

    async def _pause(self, request: FetchRequest) -> None:
        if request.min_interval_secs > 0:
            await self._clock.sleep(request.min_interval_secs)


def _whole_ms(value: object) -> int | None:
    """A time as ccxt gives one (an int of ms), or None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _settlements(in_span: Sequence[tuple[int, Any]], last_ms: int | None) -> list[tuple[int, Any]]:
    """``in_span`` oldest first without the times within ``FUNDING_MIN_GAP_MS`` of the one kept
    before (or of ``last_ms``): Binance settles funding at most hourly, so such a row is a garbled
    answer's (a repeat, a millisecond off), not a settlement."""
    kept: list[tuple[int, Any]] = []
    for at, item in sorted(in_span, key=lambda row: row[0]):
        before = kept[-1][0] if kept else last_ms
        if before is None or at - before >= FUNDING_MIN_GAP_MS:
            kept.append((at, item))
    return kept


def _rate(item: Any) -> float | None:
    """A rate replay loads: a finite number within ``FUNDING_RATE_MAX`` either way."""
    value = item.get("fundingRate")
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if abs(value) <= FUNDING_RATE_MAX else None  # NaN compares False


def _read_partial(path: Path, header: list[str]) -> list[list[str]]:
    """The rows of a partial file this module wrote. A last line without its line break is the one
    a kill cut (left out: fetched again), though it may hold a whole row's count of numbers; any
    other line that is not a row it writes is a person's edit or another file, refused naming it
    (``MalformedDataError``) and left as it is."""
    if not os.path.lexists(path):
        return []
    if path.is_symlink() or not path.is_file():  # rewritten in place: a link is written through
        raise MalformedDataError(f"{path}: exists but is not a regular file; move it aside")
    try:
        # bounded: a killed fetch's file extended by a gigabyte of zeros was read whole
        text = read_regular_file(path, max_bytes=DATA_FILE_MAX_BYTES)[1].decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise MalformedDataError(f"{path}: unreadable ({type(exc).__name__}: {exc})") from None
    whole, _, _cut = text.rpartition("\n")
    rows = list(csv.reader(io.StringIO(whole)))
    for number, row in enumerate(rows, start=1):
        if not (row == header if number == 1 else _fetched_row(row, len(header))):
            raise MalformedDataError(
                f"{path}: line {number} is not a row vigil data fetch writes "
                f"({','.join(header)}); delete the file to fetch the series again"
            )
    return rows[1:]


def _fetched_row(row: list[str], width: int) -> bool:
    if len(row) != width or not is_recording_time(_int_or_none(row[0])):
        return False
    try:
        return all(math.isfinite(float(cell)) for cell in row[1:])
    except ValueError:
        return False


def _int_or_none(text: str) -> int | None:
    return int(text) if text.isascii() and text.isdigit() else None


def _partial_path(final: Path) -> Path:
    return final.parent.parent / PARTIAL_DIR / final.name.removesuffix(".gz")


def _covers(path: Path, index: str, first_ms: int, last_ms: int, step_ms: int) -> bool:
    """Every bar from ``first_ms`` to ``last_ms`` is stored: spanning them is not enough, two
    fetches of days apart leave the days between them out."""
    stored = read_existing(path, index)
    if stored is None or stored.empty or not stored.index.is_unique:
        return False
    times = stored.index
    on_grid = times % step_ms == 0  # an off-grid row must not stand in for a missing bar
    inside = int(((times >= first_ms) & (times <= last_ms) & on_grid).sum())
    return inside == (last_ms - first_ms) // step_ms + 1


__all__ = ["FUNDING_MIN_GAP_MS", "FetchRequest", "Fetcher", "SeriesResult"]
