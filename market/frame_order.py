"""Live frames of the listener's connection: parse, guard, order, publish (the hot path).

Bad frames (malformed, non-finite, negative, inconsistent, out of order, duplicate) are dropped and
counted by reason, with rate-limited warnings. Binance sends a candle's close before the next
candle's first update, so a stream that starts a new candle while earlier closes are still missing
lost them: they are handed to ``market.close_repair`` to fetch by REST. A second, different close
of the newest candle is published as the exchange's correction, and REST settles it once.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping

from core.bus import EventBus
from core.clock import Clock
from core.events import MarketTick
from market.close_repair import CloseRepairer
from market.guard import FrameGuard, RejectionCounter
from market.listener_streams import Drop, RateLimitedWarnings, Repair, StreamState, same_candle
from market.parse import ServerShutdown, parse_frame
from market.wire import FrameRejected

# the listener's parts log as one component, under the name operators already filter on
log = logging.getLogger("market.listener")


class FrameOrder:
    def __init__(
        self,
        clock: Clock,
        bus: EventBus,
        streams: Mapping[tuple[str, str], StreamState],
        *,
        guard: FrameGuard,
        repairer: CloseRepairer,
        warnings: RateLimitedWarnings,
    ) -> None:
        self._clock = clock
        self._bus = bus
        self.streams = streams
        self._guard = guard
        self._repairer = repairer
        self._warnings = warnings
        self.last_frame_mono = -math.inf
        # counters (read through the listener's ``stats``)
        self.frames = 0
        self.ticks = 0
        self.rejected = RejectionCounter()
        self.missed_closes = 0
        self.corrected = 0

    def on_frame(self, raw: bytes | str) -> bool:
        """Take one frame: publish it, or drop and count it. True when it announces a shutdown.

        Nothing a frame holds may raise out of here: one bad frame must never end the feed."""
        self.frames += 1
        self.last_frame_mono = self._clock.monotonic_secs()
        try:
            message = parse_frame(raw)
            if type(message) is MarketTick:
                stream = self.streams.get((message.ticker, message.timeframe))
                if stream is None:
                    self.drop(Drop.UNEXPECTED_STREAM, f"{message.ticker} {message.timeframe}")
                    return False
                self._guard.check(message)
                if self.in_order(stream, message):
                    self._publish_live(stream, message)
                return False
        except FrameRejected as exc:
            self.drop(exc.reason, exc.detail)
            return False
        except Exception as exc:  # a parser bug must not take the feed down with it
            self.drop(Drop.PARSE_ERROR, repr(exc))
            return False
        if type(message) is ServerShutdown:
            return True
        self.drop(Drop.NOT_KLINE, f"unsubscribed {type(message).__name__}")
        return False

    def drop(self, reason: str, detail: str) -> None:
        self.rejected.add(reason)
        self._warnings.warn(reason, f"market listener: dropped a frame ({reason}: {detail})")

    def _publish_live(self, stream: StreamState, tick: MarketTick) -> None:
        if tick.closed and stream.repair_to_ms >= 0:
            stream.held_closes.append(tick)
            return
        if tick.closed:
            stream.note_closed(tick.open_time_ms)
            stream.last_close = tick
        self.ticks += 1
        self._bus.publish(tick)

    def in_order(self, stream: StreamState, tick: MarketTick) -> bool:
        """Accept a live tick unless it is older than, or repeats, what the stream already said."""
        open_ms, event_ms = tick.open_time_ms, tick.event_time_ms
        if open_ms < stream.last_open_ms or event_ms < stream.last_event_ms:
            self.drop(Drop.OUT_OF_ORDER, f"{tick.ticker} {tick.timeframe} t={open_ms} E={event_ms}")
            return False
        if open_ms == stream.last_open_ms:
            if stream.open_closed and tick.closed and self._corrects(stream, tick):
                pass  # a later close that says something else: it corrects the one published
            elif stream.open_closed or (event_ms == stream.last_event_ms and not tick.closed):
                self.drop(Drop.DUPLICATE, f"{tick.ticker} {tick.timeframe} t={open_ms}")
                return False
        else:
            self._check_closes_before(stream, open_ms)
        stream.last_open_ms = open_ms
        stream.last_event_ms = event_ms
        stream.open_closed = tick.closed
        return True

    def _corrects(self, stream: StreamState, tick: MarketTick) -> bool:
        """A second close of the newest candle, with other values: the exchange corrected it
        (or one of the two is wrong). It is published as a correction, and REST, when there is
        one, settles the candle once; after that only REST's values stand."""
        last = stream.last_close
        if last is None or last.open_time_ms != tick.open_time_ms or same_candle(last, tick):
            return False
        if stream.arbitrated_open_ms == tick.open_time_ms:
            return False
        self.corrected += 1
        log.warning(
            "market listener: %s %s close of %d corrected by the exchange (c %g -> %g, v %g -> %g)",
            tick.ticker,
            tick.timeframe,
            tick.open_time_ms,
            last.close,
            tick.close,
            last.volume,
            tick.volume,
        )
        if self._repairer.active:
            stream.arbitrated_open_ms = tick.open_time_ms  # one REST look per candle
            self._repairer.request(Repair(stream, tick.open_time_ms, tick.open_time_ms, True))
        return True

    def _check_closes_before(self, stream: StreamState, open_ms: int) -> None:
        """A new candle started: every earlier candle should have closed by now. Binance sends a
        candle's close before the next candle's first update, so a close not seen by now was lost
        (a stall, or a reconnect just after it was sent): fetch it by REST."""
        if stream.last_closed_open_ms >= 0:
            known_ms = stream.last_closed_open_ms
        elif stream.last_open_ms >= 0:
            known_ms = stream.last_open_ms - stream.step_ms  # seen forming, never closed
        else:
            return  # nothing known about this stream yet
        if stream.held_closes:  # seen live, waiting for an older repair: not missed
            known_ms = max(known_ms, stream.held_closes[-1].open_time_ms)
        first_ms, last_ms = known_ms + stream.step_ms, open_ms - stream.step_ms
        if first_ms > last_ms:
            return
        self.missed_closes += (last_ms - first_ms) // stream.step_ms + 1
        self._warnings.warn(
            "missed_close",
            f"market listener: {stream.ticker} {stream.timeframe} moved to {open_ms} without the "
            f"close(s) of {first_ms}..{last_ms}",
        )
        if self._repairer.active:
            stream.repair_to_ms = max(stream.repair_to_ms, last_ms)
            self._repairer.request(Repair(stream, first_ms, last_ms, False))


__all__ = ["FrameOrder"]
