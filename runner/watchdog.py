"""Watchdog loop: when no market data has arrived for a while, ask for a decision anyway.

Silence can mean a dead feed or a frozen market; either way the positions still need a look. The
request repeats every ``silence_secs`` while the silence lasts, never on every check.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from core.bus import EventBus
from core.clock import Clock, sleep_passable
from core.events import DecisionRequested, Event, MarketTick

log = logging.getLogger(__name__)

WATCHDOG_REASON = "watchdog_no_market_data"

#: a stream's last valid frame: when it arrived in clock ms and in real seconds
Frame = tuple[int, float]


class Watchdog:
    def __init__(
        self,
        clock: Clock,
        bus: EventBus,
        *,
        silence_secs: float = 300.0,
        check_secs: float = 15.0,
        streams: Sequence[str] = (),
        real_secs: Callable[[], float] = time.monotonic,
    ) -> None:
        """``streams`` (``"BTC/USDT 15m"``) are reported by ``market_report`` even before any
        frame. ``real_secs``: the health check judges silence in real seconds, like Docker does,
        whatever the daemon's clock (a simulator at 300 x would otherwise flap it)."""
        self._clock = clock
        self._bus = bus
        self._silence_secs = silence_secs
        self._check_secs = check_secs
        self._last_data_secs = clock.monotonic_secs()
        self._last_request_secs: float | None = None
        self.requests = 0
        self._real_secs = real_secs
        self._watch_start_real_secs = real_secs()
        # per stream (in report order): its last valid frame's clock ms and real seconds
        self._frames: dict[str, Frame | None] = dict.fromkeys(streams)
        # ticker -> timeframe -> stream name: a tick's stream without formatting it (every tick)
        self._names: dict[str, dict[str, str]] = {}

    def on_market_data(self, event: Event) -> None:
        """Inline ``market.tick`` handler: any tick is market data (parsed and validated)."""
        self._last_data_secs = self._clock.monotonic_secs()
        self._last_request_secs = None
        if isinstance(event, MarketTick):
            names = self._names.get(event.ticker)
            stream = None if names is None else names.get(event.timeframe)
            if stream is None:
                stream = self._name(event.ticker, event.timeframe)
            self._frames[stream] = (self._clock.now_ms(), self._real_secs())

    def _name(self, ticker: str, timeframe: str) -> str:
        stream = f"{ticker} {timeframe}"
        if type(ticker) is str and type(timeframe) is str:  # a subclass may format otherwise
            self._names.setdefault(ticker, {})[timeframe] = stream
        return stream

    def last_frames_ms(self) -> dict[str, int | None]:
        """Per stream, when its last valid frame arrived (clock ms; None: none yet)."""
        return {stream: None if f is None else f[0] for stream, f in self._frames.items()}

    def market_report(self) -> dict[str, dict[str, float | int | None]]:
        """Per stream: its last valid frame (clock ms, None: none yet) and the real seconds of
        silence since then (since watching started when there was none)."""
        now, start = self._real_secs(), self._watch_start_real_secs
        return {
            stream: {
                "last_frame_ms": None if frame is None else frame[0],
                "silent_real_secs": round(now - (start if frame is None else frame[1]), 3),
            }
            for stream, frame in self._frames.items()
        }

    def silence_secs(self) -> float:
        return self._clock.monotonic_secs() - self._last_data_secs

    def due(self) -> bool:
        """Would ``check`` request a decision now? (Reads only.)"""
        now_secs = self._clock.monotonic_secs()
        if now_secs - self._last_data_secs < self._silence_secs:
            return False
        last = self._last_request_secs
        return last is None or now_secs - last >= self._silence_secs

    def check(self) -> bool:
        """Publish a forced-decision request if the silence is long enough; True if it did."""
        if not self.due():
            return False
        now_secs = self._clock.monotonic_secs()
        silent_for = now_secs - self._last_data_secs
        self._last_request_secs = now_secs
        self.requests += 1
        log.warning("watchdog: no market data for %.0f s, requesting a decision", silent_for)
        self._bus.publish(
            DecisionRequested(
                at_ms=self._clock.now_ms(),
                reason=WATCHDOG_REASON,
                detail=f"no market data for {silent_for:.0f} s",
            )
        )
        return True

    async def run(self) -> None:
        # Silence counts from when watching starts: start-up work (warm-up) is not a dead feed.
        self._last_data_secs = max(self._last_data_secs, self._clock.monotonic_secs())
        self._watch_start_real_secs = max(self._watch_start_real_secs, self._real_secs())
        while True:
            # a check that is not due does nothing: a replay's clock may pass over it
            await sleep_passable(self._clock, self._check_secs, idle=self._not_due)
            self.check()

    def _not_due(self) -> bool:
        return not self.due()
