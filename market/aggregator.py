"""MultiTFAggregator: forming and closed candles per ticker x timeframe, from ``market.tick``.

Kline streams repeat themselves: every update re-sends the forming candle, a reconnect backfills
closes the stream may also deliver, and a late frame can trail a newer one. The aggregator turns
that into a clean record:

- ``CandleClosed`` is published once per candle: the first closed tick for an open time newer
  than the last one emitted wins; an identical repeat is a duplicate, an older one is stale (both
  are counted and ignored). A repeat of the newest candle with other values is a correction (the
  exchange, or REST settling a conflict, said something else): the stored candle is replaced and
  ``CandleClosed`` is published again with the corrected candle.
- ``MarketGap`` is published when a close skips candles after the previous close; the missing span
  is reported, never filled in.
- The last ``window`` closed candles are kept per series, as ``Candle`` objects and, on demand, as
  read-only numpy arrays for the numeric consumers (regime, snapshot).

Observers (the ``FeatureTracker``) see every accepted tick and close synchronously, before the bus
delivers the ``CandleClosed`` the close produced.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Iterable, Sequence
from typing import NamedTuple, Protocol

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict

from core.bus import EventBus
from core.events import Candle, Event, MarketGap, MarketTick, Timeframe
from market.close_models import candle_of, closed_event
from market.timeframes import timeframe_ms

log = logging.getLogger(__name__)

DEFAULT_WINDOW = 500


class CandleObserver(Protocol):
    """Something fed by the aggregator (the feature tracker)."""

    def on_tick(self, tick: MarketTick) -> None:
        """An accepted tick (forming or closing), in arrival order."""
        ...

    def on_close(self, ticker: str, timeframe: str, candle: Candle) -> None:
        """A newly closed (or seeded) candle; per series, open times only increase."""
        ...

    def on_correct(self, ticker: str, timeframe: str, candle: Candle) -> None:
        """The newest closed candle of a series, replaced by a corrected one (same open time)."""
        ...


class CandleArrays(NamedTuple):
    """Closed candles of one series as read-only numpy columns, oldest first."""

    open_time_ms: npt.NDArray[np.int64]
    open: npt.NDArray[np.float64]
    high: npt.NDArray[np.float64]
    low: npt.NDArray[np.float64]
    close: npt.NDArray[np.float64]
    volume: npt.NDArray[np.float64]


class AggregatorStats(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    ticks: int
    closes_emitted: int
    duplicate_closes: int  # a close for the candle already emitted, with the same values
    corrected_closes: int  # a close for the newest candle emitted, with other values
    stale_closes: int  # a close older than the last emitted one
    late_updates: int  # a forming update for a candle already closed
    stale_updates: int  # a forming update older than the current one
    gaps_reported: int
    missing_candles: int
    seeded: int


class _Series:
    __slots__ = (
        "appended",
        "arrays",
        "closed",
        "columns",
        "current",
        "last_closed_open_ms",
        "last_seeded",
        "step_ms",
    )

    def __init__(self, timeframe: str, window: int) -> None:
        self.step_ms = timeframe_ms(timeframe)
        self.closed: deque[Candle] = deque(maxlen=window)
        self.last_closed_open_ms = -1  # no close yet
        self.current: MarketTick | None = None
        self.arrays: CandleArrays | None = None  # cache, rebuilt after a correction
        self.columns: _Columns | None = None  # what ``arrays`` views (set with it)
        #: closes since ``arrays`` was made: the next read extends it by these (in C) instead of
        #: rebuilding every column from the whole window of candles (a replay reads after each)
        self.appended: list[Candle] = []
        self.last_seeded = False  # the newest candle came from history (REST): it is final


class MultiTFAggregator:
    def __init__(
        self,
        bus: EventBus,
        *,
        window: int = DEFAULT_WINDOW,
        observers: Sequence[CandleObserver] = (),
    ) -> None:
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        self._bus = bus
        self._window = window
        self._observers = tuple(observers)
        self._series: dict[tuple[str, str], _Series] = {}
        self._last_price: dict[str, tuple[int, float]] = {}  # ticker -> (event time, price)
        self._ticks = 0
        self._closes = 0
        self._duplicate_closes = 0
        self._corrected_closes = 0
        self._stale_closes = 0
        self._late_updates = 0
        self._stale_updates = 0
        self._gaps = 0
        self._missing = 0
        self._seeded = 0

    def on_tick(self, event: Event) -> None:
        """Bus handler: only ``MarketTick`` travels on ``market.tick``."""
        if type(event) is not MarketTick:
            raise TypeError(f"aggregator got {type(event).__name__} on {event.topic}")
        self.update(event)

    def update(self, tick: MarketTick) -> None:
        self._ticks += 1
        series = self._series.get((tick.ticker, tick.timeframe))
        if series is None:
            series = self._new_series(tick.ticker, tick.timeframe)
        accepted = self._close(tick, series) if tick.closed else self._form(tick, series)
        if not accepted:
            return
        last = self._last_price.get(tick.ticker)
        if last is None or tick.event_time_ms >= last[0]:
            self._last_price[tick.ticker] = (tick.event_time_ms, tick.close)
        for observer in self._observers:
            observer.on_tick(tick)

    def _form(self, tick: MarketTick, series: _Series) -> bool:
        if tick.open_time_ms <= series.last_closed_open_ms:
            self._late_updates += 1
            return False
        current = series.current
        if current is not None and (
            tick.open_time_ms < current.open_time_ms
            or (
                tick.open_time_ms == current.open_time_ms
                and tick.event_time_ms < current.event_time_ms
            )
        ):
            self._stale_updates += 1
            return False
        series.current = tick
        return True

    def _close(self, tick: MarketTick, series: _Series) -> bool:
        open_ms, last = tick.open_time_ms, series.last_closed_open_ms
        if open_ms == last:
            return self._correct(tick, series)
        if open_ms < last:
            self._stale_closes += 1
            return False
        if last >= 0 and open_ms > last + series.step_ms:
            self._report_gap(tick, last + series.step_ms, open_ms, series.step_ms)
        candle = candle_of(tick)
        self._append(tick.ticker, tick.timeframe, series, candle)
        if series.current is not None and series.current.open_time_ms <= open_ms:
            series.current = None
        self._closes += 1
        self._bus.publish(closed_event(tick, candle))
        return True

    def _correct(self, tick: MarketTick, series: _Series) -> bool:
        previous = series.closed[-1] if series.closed else None
        candle = candle_of(tick)
        if previous is None or previous == candle or series.last_seeded:
            self._duplicate_closes += 1
            return False
        series.closed[-1] = candle
        series.arrays = None
        series.appended.clear()
        self._corrected_closes += 1
        log.warning(
            "market: %s %s candle %d corrected: %s -> %s", tick.ticker, tick.timeframe,
            tick.open_time_ms, previous, candle,
        )  # fmt: skip
        for observer in self._observers:
            observer.on_correct(tick.ticker, tick.timeframe, candle)
        self._bus.publish(closed_event(tick, candle))
        return True

    def _report_gap(self, tick: MarketTick, from_ms: int, to_ms: int, step_ms: int) -> None:
        missing = (to_ms - from_ms) // step_ms
        self._gaps += 1
        self._missing += missing
        log.warning(
            "market gap: %s %s missing %d candle(s) opening %d..%d",
            tick.ticker,
            tick.timeframe,
            missing,
            from_ms,
            to_ms - step_ms,
        )
        self._bus.publish(
            MarketGap(
                ticker=tick.ticker,
                timeframe=tick.timeframe,
                missing_from_ms=from_ms,  # open time of the first missing candle
                missing_to_ms=to_ms,  # exclusive: open time of the close that revealed the gap
                missing_candles=missing,
            )
        )

    def _append(self, ticker: str, timeframe: str, series: _Series, candle: Candle) -> None:
        series.closed.append(candle)
        series.last_closed_open_ms = candle.open_time_ms
        series.last_seeded = False
        if series.arrays is not None:
            series.appended.append(candle)
            if len(series.appended) >= len(series.closed):
                series.arrays = None  # a whole window since: a rebuild is as cheap
                series.appended.clear()
        for observer in self._observers:
            observer.on_close(ticker, timeframe, candle)

    def seed(self, ticker: str, timeframe: Timeframe, candles: Iterable[Candle]) -> int:
        """Load closed history before live data (no events published). Returns candles taken.

        Candles are sorted by open time; ones not newer than the last known close are skipped, so
        seeding twice or overlapping with live closes is harmless.
        """
        series = self._series.get((ticker, timeframe)) or self._new_series(ticker, timeframe)
        taken = 0
        for candle in sorted(candles, key=lambda c: c.open_time_ms):
            if candle.open_time_ms % series.step_ms:
                raise ValueError(
                    f"{ticker} {timeframe}: candle open {candle.open_time_ms} is not aligned"
                )
            if candle.open_time_ms <= series.last_closed_open_ms:
                continue
            self._append(ticker, timeframe, series, candle)
            series.last_seeded = True
            taken += 1
        if series.current is not None and series.current.open_time_ms <= series.last_closed_open_ms:
            series.current = None
        if taken:
            last_close = series.closed[-1]
            known = self._last_price.get(ticker)
            close_time_ms = last_close.open_time_ms + series.step_ms - 1
            if known is None or close_time_ms > known[0]:
                self._last_price[ticker] = (close_time_ms, last_close.close)
        self._seeded += taken
        return taken

    def _new_series(self, ticker: str, timeframe: str) -> _Series:
        series = _Series(timeframe, self._window)
        self._series[(ticker, timeframe)] = series
        return series

    def closed(self, ticker: str, timeframe: str) -> Sequence[Candle]:
        """The last ``window`` closed candles, oldest first (a snapshot, safe to keep)."""
        series = self._series.get((ticker, timeframe))
        return tuple(series.closed) if series is not None else ()

    def closed_arrays(self, ticker: str, timeframe: str) -> CandleArrays:
        """The closed candles as read-only numpy columns (cached until the next close)."""
        series = self._series.get((ticker, timeframe))
        if series is None:
            return _arrays(())
        if series.arrays is None or series.columns is None:
            series.columns = _Columns(series.closed, 2 * self._window)
            series.arrays = series.columns.newest(len(series.closed))
        elif series.appended:
            series.arrays = series.columns.extended(series.appended, len(series.closed))
        series.appended.clear()
        return series.arrays

    def last_closed(self, ticker: str, timeframe: str) -> Candle | None:
        series = self._series.get((ticker, timeframe))
        return series.closed[-1] if series is not None and series.closed else None

    def current(self, ticker: str, timeframe: str) -> MarketTick | None:
        """The latest update of the forming candle (None right after a close)."""
        series = self._series.get((ticker, timeframe))
        return series.current if series is not None else None

    def last_price(self, ticker: str) -> float | None:
        """The newest price seen for ``ticker`` (by event time), from any timeframe."""
        last = self._last_price.get(ticker)
        return last[1] if last is not None else None

    @property
    def stats(self) -> AggregatorStats:
        return AggregatorStats(
            ticks=self._ticks,
            closes_emitted=self._closes,
            duplicate_closes=self._duplicate_closes,
            corrected_closes=self._corrected_closes,
            stale_closes=self._stale_closes,
            late_updates=self._late_updates,
            stale_updates=self._stale_updates,
            gaps_reported=self._gaps,
            missing_candles=self._missing,
            seeded=self._seeded,
        )


class _Columns:
    """A series' columns in arrays of twice the window, filled from the front. A close writes
    its row after the newest and hands out read-only views of the newest rows: a replay reads
    after every close, and concatenating every column again was most of a read's time.

    A view handed out is never written over (callers keep them): new rows go past its end, and
    when the room is used up the rows still in the window move to fresh arrays."""

    __slots__ = ("_capacity", "_columns", "_end")

    def __init__(self, candles: Sequence[Candle], capacity: int) -> None:
        self._capacity = capacity
        self._columns = _empty_columns(capacity)
        self._end = 0
        self._write(candles)

    def extended(self, appended: Sequence[Candle], size: int) -> CandleArrays:
        """The newest ``size`` rows once ``appended`` are after the rows there are."""
        if self._end + len(appended) > self._capacity:
            keep = size - len(appended)  # > 0: the aggregator rebuilds after a whole window
            fresh = _empty_columns(self._capacity)
            for new, old in zip(fresh, self._columns, strict=True):
                new[:keep] = old[self._end - keep : self._end]
            self._columns, self._end = fresh, keep
        self._write(appended)
        return self.newest(size)

    def newest(self, size: int) -> CandleArrays:
        end = self._end
        start = end - size
        arrays = CandleArrays._make(column[start:end] for column in self._columns)
        for column in arrays:
            column.flags.writeable = False  # shared by every caller until the next close
        return arrays

    def _write(self, candles: Sequence[Candle]) -> None:
        open_time_ms, open_, high, low, close, volume = self._columns
        row = self._end
        for candle in candles:
            open_time_ms[row] = candle.open_time_ms
            open_[row] = candle.open
            high[row] = candle.high
            low[row] = candle.low
            close[row] = candle.close
            volume[row] = candle.volume
            row += 1
        self._end = row


def _empty_columns(capacity: int) -> CandleArrays:
    floats = [np.empty(capacity, np.float64) for _ in range(5)]
    return CandleArrays(np.empty(capacity, np.int64), *floats)


def _arrays(candles: Iterable[Candle]) -> CandleArrays:
    rows = list(candles)
    arrays = CandleArrays(
        open_time_ms=np.fromiter((c.open_time_ms for c in rows), np.int64, len(rows)),
        open=np.fromiter((c.open for c in rows), np.float64, len(rows)),
        high=np.fromiter((c.high for c in rows), np.float64, len(rows)),
        low=np.fromiter((c.low for c in rows), np.float64, len(rows)),
        close=np.fromiter((c.close for c in rows), np.float64, len(rows)),
        volume=np.fromiter((c.volume for c in rows), np.float64, len(rows)),
    )
    for column in arrays:
        column.flags.writeable = False  # shared by every caller until the next close
    return arrays


__all__ = [
    "DEFAULT_WINDOW",
    "AggregatorStats",
    "CandleArrays",
    "CandleObserver",
    "MultiTFAggregator",
]
