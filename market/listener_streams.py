"""The market listener's vocabulary and per-stream bookkeeping: why a connection ended (``Cause``),
why a frame was dropped (``Drop``), the stats it reports, each stream's ordering state, a queued
REST repair, and rate-limited warnings. Shared by ``market.listener`` (the connection),
``market.frame_order`` (live frames) and ``market.close_repair`` (closes fetched by REST)."""

from __future__ import annotations

import logging
from collections import Counter
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict

from core.clock import Clock
from core.events import Candle, MarketTick, Timeframe
from market.timeframes import timeframe_ms

# the listener's parts log as one component, under the name operators already filter on
log = logging.getLogger("market.listener")


class Cause:
    """Why a connection ended (``stats.reconnects`` counts these)."""

    CONNECT_FAILED = "connect_failed"
    CLOSED = "closed"  # the server closed or the network failed
    SILENCE = "silence"
    ROTATE = "rotate"
    SERVER_SHUTDOWN = "server_shutdown"
    ERROR = "error"  # a bug or an unexpected exception: logged with its traceback
    OVERSIZED = "oversized"  # a frame over MAX_MESSAGE_BYTES: websockets closes with 1009


class Drop:
    """Listener-level drop reasons, next to ``market.wire.RejectReason``."""

    OUT_OF_ORDER = "out_of_order"
    DUPLICATE = "duplicate"
    UNEXPECTED_STREAM = "unexpected_stream"
    NOT_KLINE = "not_kline"
    PARSE_ERROR = "parse_error"  # the parser raised something unexpected (a bug): see the log
    OVERSIZED = "oversized"  # over MAX_MESSAGE_BYTES; costs a reconnect


class ListenerStats(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    connects: int
    frames: int
    ticks_published: int
    rejected: dict[str, int]
    reconnects: dict[str, int]
    last_frame_at_ms: int | None
    backfilled: int
    backfill_failures: int
    missed_closes: int  # a stream moved on without its close frame
    repaired_closes: int  # of those, closes fetched by REST
    corrected_closes: int  # a later, different close from the exchange for a published candle
    arbitrated_closes: int  # conflicting closes settled by REST


class StreamState:
    """Per-stream ordering state: what was last seen and which close was last published."""

    __slots__ = (
        "arbitrated_open_ms",
        "held_closes",
        "last_close",
        "last_closed_open_ms",
        "last_event_ms",
        "last_open_ms",
        "open_closed",
        "repair_to_ms",
        "step_ms",
        "ticker",
        "timeframe",
    )

    def __init__(self, ticker: str, timeframe: Timeframe) -> None:
        self.ticker = ticker
        self.timeframe: Timeframe = timeframe
        self.step_ms = timeframe_ms(timeframe)
        self.last_open_ms = -1  # open time of the newest candle seen
        self.last_event_ms = -1  # newest event time seen (live frames only)
        self.open_closed = False  # the newest candle's close was seen
        self.last_closed_open_ms = -1  # newest candle whose close was published
        # while older closes are being repaired by REST, newer live closes wait here, so the
        # aggregator receives every close in order (a late repair would be a stale close there)
        self.repair_to_ms = -1  # newest open time a pending repair covers; -1: none pending
        self.held_closes: list[MarketTick] = []
        self.last_close: MarketTick | None = None  # the newest close published, as published
        self.arbitrated_open_ms = -1  # newest candle whose close came from (or was settled by) REST

    def note_closed(self, open_ms: int) -> None:
        self.last_closed_open_ms = max(self.last_closed_open_ms, open_ms)
        if open_ms >= self.last_open_ms:
            self.last_open_ms = open_ms
            self.open_closed = True


class Repair(NamedTuple):
    stream: StreamState
    first_ms: int
    last_ms: int
    arbiter: bool  # settle a conflicting close of first_ms rather than fetch missed ones


class RateLimitedWarnings:
    """At most one warning per key per interval, with the number of repeats in between."""

    def __init__(self, clock: Clock, interval_secs: float) -> None:
        self._clock = clock
        self._interval_secs = interval_secs
        self._last: dict[str, float] = {}
        self._suppressed: Counter[str] = Counter()

    def warn(self, key: str, message: str) -> None:
        now = self._clock.monotonic_secs()
        last = self._last.get(key)
        if last is not None and now - last < self._interval_secs:
            self._suppressed[key] += 1
            return
        self._last[key] = now
        repeats = self._suppressed.pop(key, 0)
        if repeats:
            log.warning("%s (and %d more like it since the last report)", message, repeats)
        else:
            log.warning("%s", message)


def same_candle(a: MarketTick, b: MarketTick) -> bool:
    return (a.open, a.high, a.low, a.close, a.volume) == (b.open, b.high, b.low, b.close, b.volume)


def close_tick(stream: StreamState, candle: Candle) -> MarketTick:
    """A REST candle as the close the stream would have sent."""
    close_time_ms = candle.open_time_ms + stream.step_ms - 1
    return MarketTick(
        ticker=stream.ticker,
        timeframe=stream.timeframe,
        open_time_ms=candle.open_time_ms,
        close_time_ms=close_time_ms,
        open=candle.open,
        high=candle.high,
        low=candle.low,
        close=candle.close,
        volume=candle.volume,
        closed=True,
        event_time_ms=close_time_ms,
    )


__all__ = [
    "Cause",
    "Drop",
    "ListenerStats",
    "RateLimitedWarnings",
    "Repair",
    "StreamState",
    "close_tick",
    "same_candle",
]
