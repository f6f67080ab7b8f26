"""OHLCV history over REST (ccxt ``binanceusdm``): the decision path's 4h x 180 days cache, and the
closed-candle backfill the websocket listener uses after a reconnect.

Closed candles only. "Now" is the injected Clock's (the simulator's sim time, or wall time live),
read BEFORE each request: the candle in progress at that instant, and anything later, is never
cached, and the request's ``endTime`` stops at the last closed candle, so the server does not even
send the partial one. (This assumes the server's clock is not behind the client's, true when both
read the same clock; if it were behind, the newest candle could still be in progress there.)

Pages are ccxt-sized (1000 candles: ccxt's binance caps ``fetch_ohlcv`` below the API's 1500).
Failures are retried with capped, jittered backoff on the Clock (``market.ccxt_client``). A row
that cannot be a candle (a missing or non-finite value, a price <= 0, a high under the low, a
negative volume: ``market.recorded.candle_defects``) is dropped with a warning, never cached.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

import numpy as np
import pandas as pd

from core.clock import DAY_MS, Clock
from core.events import Candle, CandleClosed, Event
from market.ccxt_client import (
    OHLCV_PAGE_LIMIT,
    RetryPolicy,
    call_with_retries,
    retry_after_secs,
    to_ccxt_symbol,
)
from market.recorded import OHLCV_COLUMNS, candle_defects
from market.timeframes import candle_open_ms, timeframe_ms

log = logging.getLogger(__name__)


class OhlcvExchange(Protocol):
    """What this module needs from a ccxt async exchange."""

    async def fetch_ohlcv(
        self,
        symbol: str,
        timeframe: str = ...,
        since: int | None = ...,
        limit: int | None = ...,
        params: dict[str, Any] = ...,
    ) -> list[list[Any]]: ...


def empty_ohlcv_frame() -> pd.DataFrame:
    """An empty frame shaped like ``market.recorded``'s: index ``open_time_ms``, float columns."""
    frame = pd.DataFrame(
        {name: pd.Series(dtype=np.float64) for name in OHLCV_COLUMNS},
        index=pd.Index([], dtype=np.int64, name="open_time_ms"),
    )
    return frame


def rows_to_frame(rows: Iterable[Sequence[Any]], what: str = "OHLCV") -> pd.DataFrame:
    """ccxt OHLCV rows ``[open_ms, o, h, l, c, v]`` -> a frame; rows with a missing value, or that
    cannot be a candle (``candle_defects``), are dropped with a warning naming ``what`` (the
    series: "BTC/USDT 4h")."""
    rows = list(rows)
    if not rows:
        return empty_ohlcv_frame()
    frame = pd.DataFrame(
        [list(row[1:6]) for row in rows],
        columns=list(OHLCV_COLUMNS),
        index=pd.Index([int(row[0]) for row in rows], dtype=np.int64, name="open_time_ms"),
        dtype=np.float64,
    )
    incomplete = frame.isna().any(axis=1)
    if incomplete.any():
        log.warning("dropping %d %s rows with missing values", int(incomplete.sum()), what)
        frame = frame[~incomplete]
    defects = candle_defects(frame.to_numpy())
    if defects:  # an exchange's garbled answer: regime fits and backfills must not see it
        impossible = np.logical_or.reduce([mask for _, mask in defects])
        log.warning(
            "dropping %d %s rows that cannot be candles (%s), the first at open time %d",
            int(impossible.sum()),
            what,
            "; ".join(f"{int(mask.sum())} with {reason}" for reason, mask in defects),
            int(frame.index[impossible][0]),
        )
        frame = frame[~impossible]
    return frame


def extended(
    cached: pd.DataFrame, rows: Sequence[Sequence[Any]], window_start_ms: int
) -> pd.DataFrame | None:
    """``cached`` (a cache's frame: sorted, unique) plus ccxt ``rows`` that only extend it
    (complete, each newer than the last), cut to the window: the frame the general merge
    (``rows_to_frame``, concat, de-duplicate, sort, cut) gives, built in one step (the refresh
    after every 4h close); None for anything else (the general merge's work)."""
    columns = list(OHLCV_COLUMNS)
    index = cached.index
    if cached.empty or not rows or list(cached.columns) != columns:
        return None
    cached_ms = index.to_numpy(dtype=np.int64)
    if not (cached_ms[1:] > cached_ms[:-1]).all():  # not sorted and unique
        return None
    try:
        open_ms = np.array([int(row[0]) for row in rows], dtype=np.int64)
        values = np.array([list(row[1:6]) for row in rows], dtype=np.float64).reshape(-1, 5)
    except (TypeError, ValueError):  # malformed rows: the general merge says what it says
        return None
    if open_ms[0] <= cached_ms[-1] or (np.diff(open_ms) <= 0).any() or candle_defects(values):
        return None
    all_ms = np.concatenate([cached_ms, open_ms])
    all_values = np.vstack([cached.to_numpy(dtype=np.float64), values])
    cut = int(np.searchsorted(all_ms, window_start_ms, side="left"))
    if cut == len(all_ms):  # nothing left in the window: the general merge's empty frame
        return None
    # the cache's column labels are taken again (equal to OHLCV_COLUMNS: checked above), and the
    # open times are int64 already: building neither afresh is a third of the frame's cost
    return pd.DataFrame(
        all_values[cut:],
        index=pd.Index(all_ms[cut:], name=index.name),
        columns=cached.columns,
    )


def with_newer_closes(frame: pd.DataFrame, closes: Sequence[Candle]) -> pd.DataFrame:
    """``frame`` plus the closed candles newer than its last row (oldest first).

    The history is refreshed over REST after a close; the live stream has the closed candle at
    once. A decision made meanwhile (a slow or rate-limited refresh) must not read indicators a
    candle behind, so readers take the cache extended with the stream's newer closes."""
    last_ms = int(frame.index[-1]) if len(frame) else None
    newer = [c for c in closes if last_ms is None or c.open_time_ms > last_ms]
    if not newer:
        return frame
    rows = [(c.open_time_ms, c.open, c.high, c.low, c.close, c.volume) for c in newer]
    return pd.concat([frame, rows_to_frame(rows)]) if len(frame) else rows_to_frame(rows)


def on_grid(rows: list[list[Any]], step_ms: int, ticker: str, interval: str) -> list[list[Any]]:
    """``rows`` without those whose open time is off the timeframe's grid (dropped with a
    warning): no candle opens 1 ms after the hour, so such a row is a garbled answer's, and cached
    it stood beside or for the real candle."""
    kept = [row for row in rows if int(row[0]) % step_ms == 0]
    if len(kept) < len(rows):
        first = next(int(row[0]) for row in rows if int(row[0]) % step_ms)
        log.warning(
            "dropping %d %s rows off the %s grid, the first at open time %d",
            len(rows) - len(kept),
            ticker,
            interval,
            first,
        )
    return kept


def page_limit(first_open_ms: int, last_open_ms: int, step_ms: int) -> int:
    """Candles to ask for: the span's count, at most a page. Binance weighs a klines request by
    its ``limit`` (1 below 100, 5 up to 1000) and ccxt's rate limiter waits ``weight x 50 ms``
    before the next request, however long ago this one was (its bucket refills only while
    requests wait): a 4h close's refresh of one candle per ticker asked with
    ``limit=1000`` made each following ticker's refresh wait 250 ms, and the decision with them."""
    return max(1, min(OHLCV_PAGE_LIMIT, (last_open_ms - first_open_ms) // step_ms + 1))


class PagedOhlcv:
    """Paginated closed-candle fetches with retries: shared by the cache, the backfill and
    replay's read-ahead of the frames the cache will hold (``runner.replay.fit_frames``)."""

    def __init__(
        self,
        exchange: OhlcvExchange,
        clock: Clock | None,
        retry: RetryPolicy,
        rand: Callable[[], float],
    ) -> None:
        if clock is None and retry.max_attempts > 1:
            raise ValueError("retries sleep on a Clock: pass clock, or a policy of 1 attempt")
        self._exchange = exchange
        self._clock = clock
        self._retry = retry
        self._rand = rand

    async def fetch(
        self, ticker: str, timeframe: str, first_open_ms: int, last_open_ms: int
    ) -> list[list[Any]]:
        """Candles with ``first_open_ms <= open <= last_open_ms``, oldest first, page by page."""
        step_ms = timeframe_ms(timeframe)
        symbol = to_ccxt_symbol(ticker)
        rows: list[list[Any]] = []
        since = first_open_ms
        while since <= last_open_ms:
            limit = page_limit(since, last_open_ms, step_ms)
            call = functools.partial(
                self._exchange.fetch_ohlcv,
                symbol,
                timeframe,
                since=since,
                limit=limit,
                params={"until": last_open_ms},
            )
            page = await self._call(call, f"fetch_ohlcv {ticker} {timeframe} since {since}")
            page = [row for row in page if since <= int(row[0]) <= last_open_ms]
            if not page:
                break
            rows.extend(on_grid(page, step_ms, ticker, timeframe))
            # the candle after the last row's, when that row is off the grid too
            since = (int(page[-1][0]) // step_ms + 1) * step_ms
            # a page shorter than asked is not the end (Binance may page shorter before the
            # present): only an empty one is, and each page with a row moves ``since`` a candle on
        return rows

    async def _call(self, call: Callable[[], Any], what: str) -> list[list[Any]]:
        result: list[list[Any]] = await call_with_retries(
            self._clock,
            call,
            what=what,
            policy=self._retry,
            retry_after=lambda: retry_after_secs(self._exchange),
            rand=self._rand,
        )
        return result


class OhlcvHistory:
    """Per-ticker cache of closed ``timeframe`` candles covering the last ``days`` days."""

    def __init__(
        self,
        exchange: OhlcvExchange,
        clock: Clock,
        *,
        tickers: Sequence[str],
        timeframe: str = "4h",
        days: int = 180,
        retry: RetryPolicy | None = None,
        rand: Callable[[], float] = random.random,
    ) -> None:
        if days < 1:
            raise ValueError(f"days must be >= 1, got {days}")
        self._step_ms = timeframe_ms(timeframe)
        self._clock = clock
        self.timeframe = timeframe
        self.days = days
        self._pages = PagedOhlcv(exchange, clock, retry or RetryPolicy(), rand)
        self._frames = {ticker: empty_ohlcv_frame() for ticker in dict.fromkeys(tickers)}
        self._locks = {ticker: asyncio.Lock() for ticker in self._frames}
        self._refreshed_at_ms: dict[str, int] = {}
        self._versions = dict.fromkeys(self._frames, 0)  # bumped at every cache update

    @property
    def tickers(self) -> tuple[str, ...]:
        return tuple(self._frames)

    def frame(self, ticker: str) -> pd.DataFrame:
        """The cached closed candles (a copy; empty until the first successful refresh)."""
        return self._frames[self._known(ticker)].copy()

    def version(self, ticker: str) -> int:
        """Changes whenever ``ticker``'s cache does (readers rebuild what they derived from it)."""
        return self._versions[self._known(ticker)]

    def refreshed_at_ms(self, ticker: str) -> int | None:
        """Clock time of the last successful refresh of ``ticker`` (None: never refreshed)."""
        return self._refreshed_at_ms.get(self._known(ticker))

    async def refresh(self, ticker: str) -> pd.DataFrame:
        """Fetch the whole window (now - days .. the last closed candle) and merge it in."""
        return (await self._update(self._known(ticker), newest_only=False)).copy()

    async def refresh_newest(self, ticker: str) -> pd.DataFrame:
        """Fetch only candles after the newest cached one (the whole window when empty)."""
        return (await self._update(self._known(ticker), newest_only=True)).copy()

    async def refresh_all(self) -> None:
        """Refresh every ticker, one after another (keeps the request weight spread out)."""
        for ticker in self._frames:
            await self.refresh(ticker)

    async def on_candle_closed(self, event: Event) -> None:
        """Bus handler: a closed candle of our timeframe brings in the newest candles."""
        if not isinstance(event, CandleClosed) or event.timeframe != self.timeframe:
            return
        if event.ticker not in self._frames:
            return
        await self._update(event.ticker, newest_only=True)  # nobody reads a copy here

    async def _update(self, ticker: str, *, newest_only: bool) -> pd.DataFrame:
        """The merged frame itself, now the cache's (callers handing it out copy it)."""
        async with self._locks[ticker]:
            now_ms = self._clock.now_ms()  # before the request: see the module docstring
            window_start_ms = now_ms - self.days * DAY_MS
            last_closed_open_ms = candle_open_ms(now_ms, self.timeframe) - self._step_ms
            cached = self._frames[ticker]
            first_ms = window_start_ms
            if newest_only and not cached.empty:
                first_ms = max(first_ms, int(cached.index[-1]) + self._step_ms)
            rows = await self._pages.fetch(ticker, self.timeframe, first_ms, last_closed_open_ms)
            merged = extended(cached, rows, window_start_ms)
            fetched = len(rows)
            if merged is None:
                fresh = rows_to_frame(rows, f"{ticker} {self.timeframe}")
                fetched = len(fresh)
                merged = pd.concat([cached, fresh]) if not cached.empty else fresh
                merged = merged[~merged.index.duplicated(keep="last")].sort_index()
                merged = merged[merged.index >= window_start_ms]
            self._frames[ticker] = merged
            self._versions[ticker] += 1
            self._refreshed_at_ms[ticker] = now_ms
            log.log(
                logging.INFO if len(merged) else logging.WARNING,
                "%s %s history: %d new candles fetched, %d cached%s",
                ticker,
                self.timeframe,
                fetched,
                len(merged),
                "" if len(merged) else " (the exchange answered none that could be read)",
            )
            return merged

    def _known(self, ticker: str) -> str:
        if ticker not in self._frames:
            raise KeyError(f"{ticker!r} is not tracked; tracked: {sorted(self._frames)}")
        return ticker


class CcxtCandleBackfill:
    """``market.ports.CandleBackfill`` over ccxt: the closed candles a websocket outage missed.

    With a ``clock``, ``until_ms`` is also capped at the clock's now (so a candle still in
    progress is never returned) and transient failures are retried; without one, one attempt.
    """

    def __init__(
        self,
        exchange: OhlcvExchange,
        *,
        clock: Clock | None = None,
        retry: RetryPolicy | None = None,
        rand: Callable[[], float] = random.random,
    ) -> None:
        policy = retry or (RetryPolicy() if clock is not None else RetryPolicy(max_attempts=1))
        self._clock = clock
        self._pages = PagedOhlcv(exchange, clock, policy, rand)

    async def closed_candles(
        self, ticker: str, timeframe: str, since_ms: int, until_ms: int
    ) -> Sequence[Candle]:
        if self._clock is not None:
            until_ms = min(until_ms, self._clock.now_ms())
        # a candle's close time is open + step - 1 (Binance's convention)
        last_open_ms = until_ms - timeframe_ms(timeframe) + 1
        first_open_ms = -(-since_ms // timeframe_ms(timeframe)) * timeframe_ms(timeframe)
        if last_open_ms < first_open_ms:
            return []
        rows = await self._pages.fetch(ticker, timeframe, first_open_ms, last_open_ms)
        frame = rows_to_frame(rows, f"{ticker} {timeframe}")
        values = frame[list(OHLCV_COLUMNS)].to_numpy(dtype=np.float64).tolist()
        return [
            Candle(open_time_ms=int(open_ms), open=o, high=h, low=lo, close=c, volume=v)
            for open_ms, (o, h, lo, c, v) in zip(frame.index.tolist(), values, strict=True)
        ]


__all__ = [
    "DAY_MS",
    "CcxtCandleBackfill",
    "OhlcvExchange",
    "OhlcvHistory",
    "PagedOhlcv",
    "empty_ohlcv_frame",
    "extended",
    "on_grid",
    "page_limit",
    "rows_to_frame",
]
