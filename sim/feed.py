"""SimFeed: the recorded market as a Binance kline stream would show it at any simulated instant.

Shared by the simulator's websocket and REST servers and by replay. It loads each ticker's recorded
base bars (5m by default; 1m, 3m or 15m from a user's data dir) and funding (when recorded) once and
answers "what does the market look like at ``now_ms``" in O(1):

- A candle of any timeframe that is a multiple of the base bar (5m, 15m, 1h, 4h) is built from the
  recorded base bars already complete in it plus the current bar's state under the intra-bar path
  rule (``sim.path.state_at``) at update index ``(now_ms - bar_open_ms) // update_interval_ms``.
  Per-bucket running highs, lows and volumes are precomputed with numpy when a ticker is loaded
  (``sim.feed_series``), so a lookup is a few array reads plus one ``state_at`` call.
- The last update of a candle (index ``n-1`` of its last base bar) is closed and carries exactly the
  recorded OHLCV resampled with ``market.recorded.resample`` (the volume is read from the resampled
  frame itself, so float summation order cannot make it differ).
- Nothing after ``now_ms`` is ever used: a bar contributes only through ``state_at`` at the current
  index, and funding only once its funding time has passed.

A candle whose recorded base bars are not all present (a hole in the recording) is never shown, like
``resample`` never fabricates one: ``kline_state`` answers ``None`` from the first missing bar on.
``gaps`` lists the holes, so a replay can report them.
"""

from __future__ import annotations

import logging
import math
from bisect import bisect_right
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from core.errors import RefuseToStartError
from market.recorded import BASE_INTERVAL_MS, DataUnavailableError, MalformedDataError
from market.timeframes import TIMEFRAME_MS
from sim.feed_series import Gap, TickerSeries
from sim.path import MIN_UPDATES_PER_BAR, state_at

log = logging.getLogger(__name__)

BAR_MS = TIMEFRAME_MS["5m"]
FUNDING_INTERVAL_MS = 8 * 3_600_000
_NO_END_MS = 1 << 62  # a window open to the recording's end


def closing_updates(after_ms: int, before_ms: int, timeframe_ms: int, interval_ms: int) -> range:
    """Instants in ``(after_ms, before_ms)`` of a stream's candle-closing updates (a candle's last
    update is at ``open + timeframe - interval``): what a stream that fell behind still sends, so
    skipping updates never skips a close. Shared by the simulator's websocket and replay."""
    first = ((after_ms + interval_ms) // timeframe_ms + 1) * timeframe_ms - interval_ms
    return range(first, before_ms, timeframe_ms)


class KlineState(NamedTuple):
    """One kline as a Binance stream shows it at an instant (a NamedTuple: built on the hot path)."""

    ticker: str
    timeframe: str
    open_time_ms: int
    close_time_ms: int  # open + timeframe - 1: Binance's ``T``
    open: float
    high: float
    low: float
    close: float
    volume: float
    closed: bool


class FundingRate(NamedTuple):
    """A recorded funding settlement: the rate (per 8 h) and when it was settled."""

    funding_time_ms: int
    rate: float


#: the longest hole in the recording a simulator serves across: the bars after a longer one
#: would follow a month of silent streams (a stray row such as a 2099 one), and the feed's dense
#: arrays spanned the years up to them (about a gigabyte a ticker)
LONGEST_SERVED_HOLE_MS = 30 * 24 * 3_600_000


def serving_feed(
    tickers: Sequence[str],
    *,
    data_dir: Path | None,
    update_interval_ms: int,
    what: str,
    start_ms: int,
    first_ms: int | None = None,
) -> SimFeed:
    """The feed a simulator started at ``start_ms`` serves ``tickers`` from: the bars from
    ``first_ms`` (None: the recording's first) up to the first hole longer than
    ``LONGEST_SERVED_HOLE_MS`` after the start (a warning names the bars left out). A ticker or
    data dir without recordings, or a malformed file, refuses to start, naming ``what`` the
    tickers came from (unchecked it was exit 1 with a traceback from deep in the loader)."""
    window = None if first_ms is None else (first_ms, _NO_END_MS)
    try:
        feed = SimFeed(
            tickers,
            data_dir=data_dir,
            update_interval_ms=update_interval_ms,
            window=window,
            hole_after=(start_ms, LONGEST_SERVED_HOLE_MS),
        )
    except (DataUnavailableError, MalformedDataError) as exc:
        raise RefuseToStartError(f"the simulator cannot serve {what}: {exc}") from None
    for ticker in feed.tickers:
        left_out_ms = feed.left_out_ms(ticker)
        if left_out_ms is not None:
            log.warning(
                "sim: %s's bars from %s on are not served: they lie after a hole of more than "
                "%d days in its recording",
                ticker,
                datetime.fromtimestamp(left_out_ms / 1000, UTC).strftime("%Y-%m-%d %H:%M"),
                LONGEST_SERVED_HOLE_MS // (24 * 3_600_000),
            )
    return feed


class SimFeed:
    """The recorded market at any simulated instant, for the simulator's servers and replay."""

    def __init__(
        self,
        tickers: Sequence[str],
        *,
        data_dir: Path | None = None,
        update_interval_ms: int = 250,
        base_interval: str = "5m",
        window: tuple[int, int] | None = None,
        hole_after: tuple[int, int] | None = None,
    ) -> None:
        if base_interval not in BASE_INTERVAL_MS:
            raise ValueError(f"base bars are {sorted(BASE_INTERVAL_MS)}, not {base_interval!r}")
        bar_ms = BASE_INTERVAL_MS[base_interval]
        if update_interval_ms <= 0 or bar_ms % update_interval_ms:
            raise ValueError(
                f"update_interval_ms must divide {bar_ms} (one {base_interval} bar), "
                f"got {update_interval_ms}"
            )
        if bar_ms // update_interval_ms < MIN_UPDATES_PER_BAR:
            raise ValueError(
                f"update_interval_ms={update_interval_ms} leaves fewer than "
                f"{MIN_UPDATES_PER_BAR} updates per {base_interval} bar"
            )
        if not tickers:
            raise ValueError("SimFeed needs at least one ticker")
        self._data_dir = data_dir
        self._base_interval = base_interval
        self._bar_ms = bar_ms
        self._update_interval_ms = update_interval_ms
        self._updates_per_bar = bar_ms // update_interval_ms
        self._window = window
        self._series = {
            ticker: TickerSeries(ticker, data_dir, base_interval, window, hole_after)
            for ticker in dict.fromkeys(tickers)
        }

    @property
    def tickers(self) -> tuple[str, ...]:
        return tuple(self._series)

    @property
    def data_dir(self) -> Path | None:
        """The data dir it was opened on (None: the bundled ``data/``)."""
        return self._data_dir

    @property
    def window(self) -> tuple[int, int] | None:
        """The (first ms, end ms) it answers for (None: the whole recording); see ``TickerSeries``."""
        return self._window

    @property
    def update_interval_ms(self) -> int:
        return self._update_interval_ms

    @property
    def updates_per_bar(self) -> int:
        return self._updates_per_bar

    @property
    def base_interval(self) -> str:
        return self._base_interval

    @property
    def bar_ms(self) -> int:
        return self._bar_ms

    def span_ms(self, ticker: str) -> tuple[int, int]:
        """(first bar's open, last bar's close time = open + bar - 1): where kline_state answers
        (within the window, when the feed was opened on one)."""
        series = self._get(ticker)
        return series.first_open_ms, series.last_open_ms + self._bar_ms - 1

    def left_out_ms(self, ticker: str) -> int | None:
        """The open of the first bar left out after a long hole (``hole_after``), or None."""
        return self._get(ticker).left_out_ms

    def gaps(self, ticker: str) -> list[Gap]:
        """Holes in the ticker's recorded base bars, oldest first."""
        return list(self._get(ticker).gaps)

    def funding_series(self, ticker: str) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        """The recorded settlement times and rates, oldest first (empty without a funding file)."""
        series = self._get(ticker)
        return series.funding_ms, series.funding_rate

    def funding_missing(self, ticker: str) -> str | None:
        """Why the ticker has no recorded funding (None when it has)."""
        return self._get(ticker).funding_missing

    def price_decimals(self, ticker: str) -> int:
        """Decimals of the recorded prices (the symbol's tick precision), for formatting."""
        return self._get(ticker).price_decimals

    def quantity_decimals(self, ticker: str) -> int:
        """Decimals of the recorded volumes (the symbol's quantity step), for formatting."""
        return self._get(ticker).quantity_decimals

    def kline_state(self, ticker: str, timeframe: str, now_ms: int) -> KlineState | None:
        """The ``timeframe`` candle containing ``now_ms`` as a kline stream shows it then.

        None outside the recording or when a recorded 5m bar of the candle so far is missing.
        """
        series = self._get(ticker)
        buckets = series.by_timeframe.get(timeframe)
        if buckets is None:
            raise ValueError(
                f"unsupported timeframe {timeframe!r}; known: {sorted(series.by_timeframe)}"
            )
        bar_ms = self._bar_ms
        slot = (now_ms - series.base_ms) // bar_ms
        if now_ms < series.first_open_ms or not 0 <= slot < series.slots:
            return None
        bar_open = series.open.item(slot)
        if math.isnan(bar_open):
            return None
        k = buckets.bars_per_candle
        position = slot % k
        prior_high = buckets.prior_high.item(slot)
        if math.isnan(prior_high):  # an earlier bar of this candle is missing
            return None
        index = (now_ms - series.base_ms - slot * bar_ms) // self._update_interval_ms
        memo = series.bar_memo
        if memo is not None and memo[0] == slot and memo[1] == index:
            bar = memo[2]  # every timeframe of one instant walks the same base bar
        else:
            bar = state_at(
                bar_open,
                series.high.item(slot),
                series.low.item(slot),
                series.close.item(slot),
                series.volume.item(slot),
                index,
                self._updates_per_bar,
            )
            series.bar_memo = (slot, index, bar)
        closed = position == k - 1 and index == self._updates_per_bar - 1
        if closed:
            volume = buckets.closed_volume.item(slot // k)
        else:
            volume = buckets.prior_volume.item(slot) + bar.volume
        open_time_ms = series.base_ms + (slot - position) * bar_ms
        return KlineState(
            ticker=ticker,
            timeframe=timeframe,
            open_time_ms=open_time_ms,
            close_time_ms=open_time_ms + k * bar_ms - 1,
            open=series.open.item(slot - position),
            high=max(prior_high, bar.high),
            low=min(buckets.prior_low.item(slot), bar.low),
            close=bar.price,
            volume=volume,
            closed=closed,
        )

    def has_price(self, ticker: str, now_ms: int) -> bool:
        """``last_price(ticker, now_ms) is not None`` without walking the bar: the checks by which
        ``kline_state`` answers None for the base timeframe (a poll that only needs to know
        whether there is a price paid a bar walk for each ticker)."""
        series = self._get(ticker)
        slot = (now_ms - series.base_ms) // self._bar_ms
        if now_ms < series.first_open_ms or not 0 <= slot < series.slots:
            return False
        prior_high = series.by_timeframe[self._base_interval].prior_high
        return not (math.isnan(series.open.item(slot)) or math.isnan(prior_high.item(slot)))

    def last_price(self, ticker: str, now_ms: int) -> float | None:
        """The price a kline stream shows at ``now_ms`` (None outside the recording)."""
        state = self.kline_state(ticker, self._base_interval, now_ms)
        return None if state is None else state.close

    def closed_candles(
        self,
        ticker: str,
        timeframe: str,
        start_ms: int | None,
        end_ms: int,
        limit: int,
    ) -> list[KlineState]:
        """Complete candles with ``start_ms <= open_time_ms`` and close time ``<= end_ms``.

        Pass ``end_ms = min(requested end, now)`` to serve only what has closed by ``now`` (this
        method has no clock; the bound is the caller's). With ``start_ms`` the first ``limit``
        candles from it are returned, without it the last ``limit`` before ``end_ms`` (Binance's
        rule for klines with and without ``startTime``). Oldest first.
        """
        if limit <= 0:
            return []
        series = self._get(ticker)
        buckets = series.by_timeframe.get(timeframe)
        if buckets is None:
            raise ValueError(
                f"unsupported timeframe {timeframe!r}; known: {sorted(series.by_timeframe)}"
            )
        tf_ms = buckets.bars_per_candle * self._bar_ms
        opens = buckets.closed_open_ms
        # close time = open + tf - 1 <= end  <=>  open <= end - tf + 1
        stop = int(np.searchsorted(opens, end_ms - tf_ms + 1, side="right"))
        if start_ms is None:
            begin = max(0, stop - limit)
        else:
            begin = int(np.searchsorted(opens, start_ms, side="left"))
            stop = min(stop, begin + limit)
        out = []
        for row in range(begin, stop):
            open_ms = int(opens[row])
            o, h, low, c, v = buckets.closed_ohlcv[row].tolist()
            out.append(
                KlineState(ticker, timeframe, open_ms, open_ms + tf_ms - 1, o, h, low, c, v, True)
            )
        return out

    def funding_rate_at(self, ticker: str, now_ms: int) -> FundingRate | None:
        """The latest recorded funding settled at or before ``now_ms`` (None before the first)."""
        series = self._get(ticker)
        row = bisect_right(series.funding_times, now_ms) - 1
        if row < 0:
            return None
        return FundingRate(series.funding_times[row], series.funding_rate.item(row))

    @staticmethod
    def next_funding_time_ms(now_ms: int) -> int:
        """Binance's next funding settlement after ``now_ms`` (00:00, 08:00, 16:00 UTC)."""
        return (now_ms // FUNDING_INTERVAL_MS + 1) * FUNDING_INTERVAL_MS

    def _get(self, ticker: str) -> TickerSeries:
        try:
            return self._series[ticker]
        except KeyError:
            raise DataUnavailableError(
                f"ticker {ticker!r} is not in this feed; it serves {sorted(self._series)}"
            ) from None


__all__ = [
    "BAR_MS",
    "FUNDING_INTERVAL_MS",
    "FundingRate",
    "KlineState",
    "SimFeed",
]
