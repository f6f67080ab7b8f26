"""RecordedTicks: the replay's tick source, the in-process twin of ``MarketListener`` + simulator.

It publishes on the bus exactly the ``MarketTick`` events the listener would publish when connected
to the simulator's websocket server (sim/ws_server.py) over the same ``SimFeed``:

- the updates of every stream fall on the feed's update grid (multiples of ``update_interval_ms``);
  the event time ``E`` of an update is its grid instant, and it is published when the clock reads
  that instant;
- each kline is ``feed.kline_state(ticker, timeframe, instant)`` written with the simulator's own
  formatting (``sim.ws_streams.format_ohlcv``) and read back with ``float``, as the listener's parser
  does, so prices and volumes are rounded exactly as on the wire;
- streams go in the order the listener subscribes them (ticker-major, then timeframe), which is the
  order the simulator sends the frames of one instant in;
- a stream whose candle has a hole in the recording is silent (``kline_state`` is ``None``);
- if the clock ever runs ahead of the loop (a wall or scaled clock), it catches up as the simulator
  does: intermediate updates are skipped, every candle's closing update is still published.

Given a ``read_ahead`` executor (replay's one-process pool, ``sim.tick_ahead.open_tick_pool``), the
rows of the updates published on the grid instant by instant (all of a replay's on a virtual clock)
are computed ahead in that process (``sim.tick_ahead.RowsAhead``, the same ``sim.tick_rows``
functions); this process only makes and publishes the ``MarketTick``. Catch-up and backfill stay
here.

Ticks are published from the first grid instant at or after the clock's reading when ``run`` starts
(the simulator would send a client connecting at that instant the ones strictly after it). Closes
between a ``resume_from`` point and that first instant are published first, like the listener's
connect-time backfill. ``run`` returns after ``end_ms`` or the end of the recording and sets
``finished``; the supervisor expects loops to run forever, so the replay driver watches ``finished``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from concurrent.futures import Executor
from typing import Final, NamedTuple

from pydantic import BaseModel, ConfigDict

from core.bus import EventBus
from core.clock import Clock
from core.events import MarketTick, Timeframe
from market.timeframes import TIMEFRAME_MS
from sim.feed import KlineState, SimFeed, closing_updates
from sim.tick_ahead import RowsAhead
from sim.tick_rows import ROW_WIDTH, instant_rows, kline_row, make_tick
from sim.ws_streams import KlineFormat

log = logging.getLogger(__name__)

#: a clock that woke a hair early (float rounding of a scaled clock) sleeps at least this long again
MIN_RESLEEP_SECS: Final = 0.001


class RecordedTickStats(BaseModel):
    """What the status line reads (the listener's names); nothing is rejected or reconnected here."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    ticks_published: int
    rejected: dict[str, int]
    reconnects: dict[str, int]
    last_event_ms: int | None  # grid instant of the newest published update
    backfilled: int  # closes published at start after a ``resume_from`` point


class _Stream(NamedTuple):
    ticker: str
    timeframe: Timeframe
    timeframe_ms: int
    fmt: KlineFormat


def due_updates(
    timeframes_ms: Sequence[int], last_ms: int, latest_ms: int, interval_ms: int
) -> list[tuple[int, int]]:
    """(event ms, stream index) due in ``(last_ms, latest_ms]``, sorted by time then stream.

    ``latest_ms`` is a grid instant. Per stream: the latest update, plus every candle-closing update
    before it (the simulator's catch-up rule, so falling behind skips updates but never a close).
    """
    due: list[tuple[int, int]] = []
    if latest_ms <= last_ms:
        return due
    for index, tf_ms in enumerate(timeframes_ms):
        closes = closing_updates(last_ms, latest_ms, tf_ms, interval_ms)
        due.extend((closing, index) for closing in closes)
        due.append((latest_ms, index))
    due.sort()
    return due


class RecordedTicks:
    """Publishes the recording's kline updates as ``MarketTick`` on the bus, on the injected clock."""

    def __init__(
        self,
        clock: Clock,
        bus: EventBus,
        feed: SimFeed,
        *,
        tickers: Sequence[str],
        timeframes: Sequence[Timeframe],
        end_ms: int | None = None,
        read_ahead: Executor | None = None,
    ) -> None:
        if not tickers or not timeframes:
            raise ValueError("RecordedTicks needs at least one ticker and one timeframe")
        unknown = [tf for tf in timeframes if tf not in TIMEFRAME_MS]
        if unknown:
            raise ValueError(f"unsupported timeframes {unknown}; known: {sorted(TIMEFRAME_MS)}")
        self._clock = clock
        self._bus = bus
        self._feed = feed
        self._interval_ms = feed.update_interval_ms
        tickers = list(dict.fromkeys(tickers))
        spans = [feed.span_ms(ticker) for ticker in tickers]  # DataUnavailableError if not served
        self._streams = tuple(
            _Stream(ticker, tf, TIMEFRAME_MS[tf], KlineFormat.of(feed, ticker))
            for ticker in tickers
            for tf in dict.fromkeys(timeframes)
        )
        self._streams_tf_ms = [stream.timeframe_ms for stream in self._streams]
        self._names = tuple((s.ticker, s.timeframe) for s in self._streams)
        self._keys = tuple((s.ticker, s.timeframe, s.fmt) for s in self._streams)
        self._first_ms = min(first for first, _ in spans)
        stop_ms = max(last for _, last in spans)
        if end_ms is not None:
            stop_ms = min(stop_ms, end_ms)
        self._stop_ms = stop_ms - stop_ms % self._interval_ms  # the last instant published
        self._ahead = (
            None if read_ahead is None else RowsAhead(read_ahead, feed, self._keys, self._stop_ms)
        )
        self.finished = asyncio.Event()
        self._resume: dict[tuple[str, str], int] = {}
        self._last_ms: int | None = None  # newest instant published
        self._ticks = 0
        self._backfilled = 0

    # -- public ---------------------------------------------------------------------------------

    @property
    def stop_ms(self) -> int:
        """The last update instant this source publishes (``end_ms`` or the recording's end)."""
        return self._stop_ms

    @property
    def stats(self) -> RecordedTickStats:
        return RecordedTickStats(
            ticks_published=self._ticks,
            rejected={},
            reconnects={},
            last_event_ms=self._last_ms,
            backfilled=self._backfilled,
        )

    def prefetch(self, *, wait: bool = False) -> None:
        """Start computing rows ahead from the clock's now (the first instant ``run`` will
        publish unless the clock moves first); ``wait``: until the first chunk is done (tests:
        otherwise the first instants may be computed here while the worker starts)."""
        if self._ahead is not None:
            self._ahead.prefetch(self._start_ms(), wait=wait)

    def resume_from(self, ticker: str, timeframe: str, last_closed_open_ms: int) -> None:
        """The newest close already known (from seeded history): closes after it that ended before
        the first published instant are published when ``run`` starts, like the listener's
        connect-time backfill. Warm-up seeds up to the clock's now, so normally there are none."""
        if not any(s.ticker == ticker and s.timeframe == timeframe for s in self._streams):
            raise KeyError(f"not a published stream: {ticker} {timeframe}")
        key = (ticker, timeframe)
        self._resume[key] = max(self._resume.get(key, last_closed_open_ms), last_closed_open_ms)

    async def run(self) -> None:
        """Publish every update due until ``stop_ms``, then set ``finished`` and return.

        Called again (a restart), it carries on after the last instant it published. A failure
        (a bug: the data was validated when the feed loaded it) raises to the caller.
        """
        interval_ms = self._interval_ms
        last_ms = self._last_ms
        if last_ms is None:
            first_ms = self._start_ms()
            self._publish_missed_closes(before_ms=first_ms)
            last_ms = self._last_ms = first_ms - interval_ms
        while last_ms < self._stop_ms:
            next_ms = last_ms + interval_ms
            now_ms = self._clock.now_ms()
            if now_ms < next_ms:
                await self._clock.sleep(max((next_ms - now_ms) / 1000.0, MIN_RESLEEP_SECS))
                now_ms = self._clock.now_ms()
                if now_ms < next_ms:
                    continue  # woke early (float rounding of a scaled clock): sleep the rest
            latest_ms = min(now_ms - now_ms % interval_ms, self._stop_ms)
            if latest_ms == next_ms:
                self._publish_all(latest_ms)
            else:
                self._catch_up(last_ms, latest_ms)
            last_ms = self._last_ms = latest_ms
        if not self.finished.is_set():
            log.info("recorded ticks: finished at %d (%d ticks)", self._stop_ms, self._ticks)
            self.finished.set()

    # -- publishing -----------------------------------------------------------------------------

    def _start_ms(self) -> int:
        """First instant: the first grid instant at or after now, not before the recording."""
        start_ms = max(self._clock.now_ms(), self._first_ms)
        return -(-start_ms // self._interval_ms) * self._interval_ms

    def _publish_all(self, event_ms: int) -> None:
        """Every stream's update at ``event_ms`` (the hot path: one call per instant)."""
        ahead = None if self._ahead is None else self._ahead.rows_at(event_ms)
        if ahead is None:
            rows, at = instant_rows(self._feed, self._keys, event_ms, 1, self._interval_ms), 0
        else:
            rows, at = ahead
        ticks = []
        for ticker, timeframe in self._names:
            if rows[at] is not None:  # None: a hole in the recording (or outside it): silent
                ticks.append(make_tick(ticker, timeframe, rows[at : at + ROW_WIDTH], event_ms))
            at += ROW_WIDTH
        self._bus.publish_each(ticks)
        self._ticks += len(ticks)

    def _catch_up(self, last_ms: int, latest_ms: int) -> None:
        due = due_updates(self._streams_tf_ms, last_ms, latest_ms, self._interval_ms)
        log.debug("recorded ticks: behind the clock, catching up %d..%d", last_ms, latest_ms)
        for event_ms, index in due:
            ticker, timeframe, _, fmt = self._streams[index]
            state = self._feed.kline_state(ticker, timeframe, event_ms)
            if state is not None:
                self._bus.publish(_tick(state, fmt, event_ms))
                self._ticks += 1

    def _publish_missed_closes(self, before_ms: int) -> None:
        """Closes after each ``resume_from`` point whose closing update came before ``before_ms``;
        event time = close time, as the listener's REST backfill publishes them."""
        for ticker, timeframe, tf_ms, fmt in self._streams:
            known_ms = self._resume.get((ticker, timeframe))
            if known_ms is None:
                continue
            # closing update open + tf - interval < before_ms  <=>  close time open + tf - 1 < before
            limit = max(0, (before_ms - known_ms) // tf_ms)
            candles = self._feed.closed_candles(
                ticker, timeframe, known_ms + tf_ms, before_ms - 1, limit
            )
            for candle in candles:
                self._bus.publish(_tick(candle, fmt, candle.close_time_ms))
            self._ticks += len(candles)
            self._backfilled += len(candles)


def _tick(state: KlineState, fmt: KlineFormat, event_ms: int) -> MarketTick:
    return make_tick(state.ticker, state.timeframe, kline_row(state, fmt), event_ms)


__all__ = ["RecordedTickStats", "RecordedTicks", "due_updates"]
