"""Closes the socket did not deliver, fetched by REST (the listener's ``CandleBackfill``).

Three jobs, all publishing closes in order on the bus:

- on connect, backfill every close missed while disconnected (``backfill_missed``);
- during a connection, fetch closes a stream skipped (a stall, or a reconnect just after a close
  went out), retrying briefly while REST catches up; live closes that arrive meanwhile are held by
  the stream and released after the repair, so the aggregator sees every close in order;
- settle a candle the stream closed twice with different values (REST's close is final).

What stays missing is reported as a gap by the aggregator.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence

from core.bus import EventBus
from core.clock import Clock
from core.events import Candle
from market.guard import FrameGuard
from market.listener_streams import Repair, StreamState, close_tick, same_candle
from market.ports import CandleBackfill

# the listener's parts log as one component, under the name operators already filter on
log = logging.getLogger("market.listener")


class CloseRepairer:
    def __init__(
        self,
        clock: Clock,
        bus: EventBus,
        streams: Mapping[tuple[str, str], StreamState],
        *,
        backfill: CandleBackfill | None,
        guard: FrameGuard,
        attempts: int,
        retry_delay_secs: Callable[[int], float],
    ) -> None:
        """``retry_delay_secs(attempt)``: the listener's backoff (one jitter source for both)."""
        self._clock = clock
        self._bus = bus
        self._streams = streams
        self._backfill = backfill
        self._guard = guard
        self._attempts = attempts
        self._retry_delay_secs = retry_delay_secs
        self._queue: asyncio.Queue[Repair] | None = None
        # counters (read through the listener's ``stats``)
        self.released = 0  # live closes published after being held
        self.backfilled = 0
        self.backfill_failures = 0
        self.repaired = 0
        self.arbitrated = 0

    @property
    def active(self) -> bool:
        """Repairs can be asked for: there is a backfill and a connection is up."""
        return self._backfill is not None and self._queue is not None

    def request(self, repair: Repair) -> None:
        assert self._queue is not None
        self._queue.put_nowait(repair)

    def open(self) -> asyncio.Queue[Repair]:
        """A fresh queue for a new connection (``run`` drains it)."""
        self._queue = asyncio.Queue()
        return self._queue

    def close(self) -> None:
        """Pending repairs end with the connection."""
        self._queue = None
        for stream in self._streams.values():
            if stream.repair_to_ms >= 0:
                # publishing the held closes now would step past the unrepaired gap, and the next
                # connection's backfill starts after the newest published close: drop them
                # instead; that backfill fetches the gap and them, in order
                stream.repair_to_ms = -1
                stream.held_closes = []

    async def backfill_missed(self, until_ms: int) -> None:
        """Publish, in order, every close each stream missed up to ``until_ms`` (connect time)."""
        if self._backfill is None:
            return
        for stream in self._streams.values():
            if stream.last_closed_open_ms < 0:
                continue  # nothing seen yet: history is seeded by whoever starts us
            since_ms = stream.last_closed_open_ms + stream.step_ms
            if since_ms + stream.step_ms - 1 > until_ms:
                continue  # no candle can have closed since
            candles = await self._fetch(stream, since_ms, until_ms)
            self._publish_closes(stream, candles, before_open_ms=None)

    async def run(self, queue: asyncio.Queue[Repair]) -> None:
        """Fetch closes that never arrived on the socket (see ``FrameOrder.check_closes_before``),
        and settle conflicting closes (see ``FrameOrder.corrects``)."""
        while True:
            stream, first_ms, last_ms, arbiter = await queue.get()
            try:
                if arbiter:
                    await self._arbitrate(stream, first_ms)
                    continue
                await self._repair(stream, first_ms, last_ms)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("market listener: repairing missed closes failed")
            if stream.repair_to_ms <= last_ms:  # no later repair of this stream is queued
                self._release_held(stream)

    def _release_held(self, stream: StreamState) -> None:
        """Publish the live closes held during a repair, oldest first (the aggregator reports any
        close still missing as a gap)."""
        stream.repair_to_ms = -1
        held, stream.held_closes = stream.held_closes, []
        for tick in held:
            if tick.open_time_ms > stream.last_closed_open_ms:
                stream.note_closed(tick.open_time_ms)
                stream.last_close = tick
                self.released += 1
                self._bus.publish(tick)

    async def _arbitrate(self, stream: StreamState, open_ms: int) -> None:
        """REST's close of a candle the stream closed twice, differently, published as the final
        correction when it differs from what was last published."""
        candles = await self._fetch(stream, open_ms, self._clock.now_ms())
        candle = next((c for c in candles if c.open_time_ms == open_ms), None)
        if candle is None:
            log.warning(
                "market listener: REST has no %s %s close of %d to settle the conflict with",
                stream.ticker,
                stream.timeframe,
                open_ms,
            )
            return
        tick = close_tick(stream, candle)
        self._guard.note_price(stream.ticker, candle.close)
        last = stream.last_close
        if last is not None and last.open_time_ms == open_ms and same_candle(last, tick):
            return  # the last correction was right
        if stream.last_closed_open_ms > open_ms:
            return  # newer closes are out: the aggregator only corrects its newest candle
        self.arbitrated += 1
        stream.last_close = tick
        self._bus.publish(tick)

    async def _repair(self, stream: StreamState, first_ms: int, last_ms: int) -> None:
        # the REST side may lag the socket by a moment: ask again until the closes are there
        for attempt in range(self._attempts):
            if stream.last_closed_open_ms >= last_ms:
                return  # repaired (newer live closes are held until the repair is done)
            since_ms = max(first_ms, stream.last_closed_open_ms + stream.step_ms)
            candles = await self._fetch(stream, since_ms, self._clock.now_ms())
            self.repaired += self._publish_closes(
                stream, candles, before_open_ms=stream.last_open_ms
            )
            if stream.last_closed_open_ms >= last_ms:
                return
            await self._clock.sleep(self._retry_delay_secs(attempt))
        log.warning(
            "market listener: %s %s closes %d..%d still missing; the aggregator reports the gap",
            stream.ticker,
            stream.timeframe,
            first_ms,
            last_ms,
        )

    async def _fetch(self, stream: StreamState, since_ms: int, until_ms: int) -> Sequence[Candle]:
        """Closed candles from the backfill, retried with backoff; empty after the last failure."""
        assert self._backfill is not None
        for attempt in range(self._attempts):
            try:
                return await self._backfill.closed_candles(
                    stream.ticker, stream.timeframe, since_ms, until_ms
                )
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning(
                    "market listener: backfill %s %s from %d failed (attempt %d/%d): %r",
                    stream.ticker,
                    stream.timeframe,
                    since_ms,
                    attempt + 1,
                    self._attempts,
                    exc,
                )
                if attempt + 1 < self._attempts:
                    await self._clock.sleep(self._retry_delay_secs(attempt))
        self.backfill_failures += 1
        log.error(
            "market listener: giving up backfilling %s %s from %d; the aggregator will report "
            "the gap",
            stream.ticker,
            stream.timeframe,
            since_ms,
        )
        return ()

    def _publish_closes(
        self, stream: StreamState, candles: Sequence[Candle], before_open_ms: int | None
    ) -> int:
        published = 0
        for candle in sorted(candles, key=lambda c: c.open_time_ms):
            open_ms = candle.open_time_ms
            if open_ms <= stream.last_closed_open_ms or open_ms % stream.step_ms:
                continue
            if before_open_ms is not None and open_ms >= before_open_ms:
                continue  # the stream is already past it live: only older closes are missing
            tick = close_tick(stream, candle)
            self._bus.publish(tick)
            self._guard.note_price(stream.ticker, candle.close)  # REST is trusted
            stream.note_closed(open_ms)
            stream.last_close = tick
            stream.arbitrated_open_ms = open_ms  # REST's close is final: no live correction
            published += 1
        self.backfilled += published
        return published


__all__ = ["CloseRepairer"]
