"""MarketListener: one Binance combined-stream connection for every ticker x timeframe.

Each connection goes: connect -> backfill the closes missed while disconnected (REST) -> drain the
socket, publishing ``MarketTick`` on the bus. Connecting before the backfill means no close can fall
between the two: a candle that closes after the connect arrives on the socket, which buffers while
the backfill runs. Overlap is harmless: the listener drops a close it already published, and the
aggregator dedupes anything that still gets through.

The connection is replaced when:

- nothing at all arrives for ``silence_timeout_secs`` of clock time (a dead or stalled connection);
  a watcher task compares the clock with the last frame time, so the per-frame path has no timer;
- the server announces ``serverShutdown``, or the connection has lived ``rotate_after_secs``
  (Binance cuts at 24 h): both reconnect at once; rotation waits for a moment away from candle
  boundaries, so no close is in flight while the sockets change;
- the server closes it or the network fails: reconnect after capped, jittered exponential backoff
  on the clock, reset by a connection that delivered data.

Each frame goes through ``market.frame_order`` (parse, guard, order, publish; bad frames dropped and
counted by reason); closes the socket did not deliver are fetched by ``market.close_repair``; the
shared vocabulary (``Cause``, ``Drop``, ``ListenerStats``, per-stream state) is
``market.listener_streams``. This module is the connection: connect, watch, rotate, reconnect.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Final, NoReturn

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, WebSocketException
from websockets.frames import CloseCode

from core.backoff import Backoff
from core.bus import EventBus
from core.clock import Clock
from core.events import Timeframe
from market.close_repair import CloseRepairer
from market.frame_order import FrameOrder
from market.guard import FrameGuard, FrameGuardConfig, RejectionCounter
from market.listener_streams import Cause, Drop, ListenerStats, RateLimitedWarnings, StreamState
from market.ports import CandleBackfill
from market.timeframes import timeframe_ms, to_binance_symbol
from market.wire import kline_stream_name

log = logging.getLogger(__name__)

DEFAULT_TIMEFRAMES: Final[tuple[Timeframe, ...]] = ("15m", "1h", "4h")
JITTER_FRACTION: Final = 0.5
#: frames the websocket buffers while the backfill runs (Binance pushes ~4 per stream per second)
MAX_QUEUED_FRAMES: Final = 4096
MAX_MESSAGE_BYTES: Final = 1 << 20
#: seconds the closing handshake may take before the connection is dropped
CLOSE_TIMEOUT_SECS: Final = 1.0
#: rotation avoids this close to a candle boundary (where a close frame may be in flight)
ROTATE_QUIET_MARGIN_MS: Final = 60_000
WARN_INTERVAL_SECS: Final = 60.0
MIN_WATCH_SLEEP_SECS: Final = 0.001


_PROMPT_CAUSES: Final = frozenset({Cause.ROTATE, Cause.SERVER_SHUTDOWN})


class MarketListener:
    def __init__(
        self,
        clock: Clock,
        bus: EventBus,
        *,
        base_url: str,
        tickers: Sequence[str],
        timeframes: Sequence[Timeframe] = DEFAULT_TIMEFRAMES,
        backfill: CandleBackfill | None = None,
        silence_timeout_secs: float = 30.0,
        rotate_after_secs: float = 23.5 * 3600,
        reconnect_base_secs: float = 1.0,
        reconnect_cap_secs: float = 60.0,
        rng: random.Random | None = None,
        path: str = "/market/stream",
        backfill_attempts: int = 3,
        guard: FrameGuardConfig | None = None,
        reference_price: Callable[[str], float | None] | None = None,
    ) -> None:
        if not tickers or not timeframes:
            raise ValueError("MarketListener needs at least one ticker and one timeframe")
        if silence_timeout_secs <= 0 or rotate_after_secs <= 0 or backfill_attempts < 1:
            raise ValueError("timeouts must be > 0 and backfill_attempts >= 1")
        self._clock = clock
        self._silence_timeout_secs = silence_timeout_secs
        self._rotate_after_secs = rotate_after_secs
        self._reconnect = Backoff(
            base_secs=reconnect_base_secs,
            cap_secs=reconnect_cap_secs,
            jitter_fraction=JITTER_FRACTION,
        )
        self._rng = rng or random.Random()
        self._streams: dict[tuple[str, str], StreamState] = {
            (ticker, tf): StreamState(ticker, tf) for ticker in tickers for tf in timeframes
        }
        names = [
            kline_stream_name(to_binance_symbol(ticker), tf)
            for ticker in tickers
            for tf in timeframes
        ]
        self.url = f"{base_url.rstrip('/')}{path}?streams={'/'.join(names)}"
        self._min_step_ms = min(timeframe_ms(tf) for tf in timeframes)
        self._warnings = RateLimitedWarnings(clock, WARN_INTERVAL_SECS)
        self._end_cause: str | None = None
        self.guard = FrameGuard(clock, guard, reference_price=reference_price)
        self._repairer = CloseRepairer(
            clock,
            bus,
            self._streams,
            backfill=backfill,
            guard=self.guard,
            attempts=backfill_attempts,
            retry_delay_secs=self._retry_delay_secs,
        )
        #: the live frame path (``on_frame``), exposed for tests that feed frames without a socket
        self.frames = FrameOrder(
            clock,
            bus,
            self._streams,
            guard=self.guard,
            repairer=self._repairer,
            warnings=self._warnings,
        )
        # counters (read through ``stats``)
        self._connects = 0
        self._reconnects: Counter[str] = Counter()

    # -- public ---------------------------------------------------------------------------------

    def resume_from(self, ticker: str, timeframe: str, last_closed_open_ms: int) -> None:
        """Declare the newest close already known (from seeded history), so the first connect
        backfills everything after it instead of starting blind."""
        stream = self._streams.get((ticker, timeframe))
        if stream is None:
            raise KeyError(f"not a subscribed stream: {ticker} {timeframe}")
        stream.note_closed(last_closed_open_ms)

    @property
    def stats(self) -> ListenerStats:
        frames, repairer = self.frames, self._repairer
        last_frame_at_ms = None
        if frames.frames:
            ago_secs = self._clock.monotonic_secs() - frames.last_frame_mono
            last_frame_at_ms = self._clock.now_ms() - round(ago_secs * 1000.0)
        return ListenerStats(
            connects=self._connects,
            frames=frames.frames,
            ticks_published=self._ticks_published(),
            rejected=frames.rejected.as_dict(),
            reconnects=dict(self._reconnects),
            last_frame_at_ms=last_frame_at_ms,
            backfilled=repairer.backfilled,
            backfill_failures=repairer.backfill_failures,
            missed_closes=frames.missed_closes,
            repaired_closes=repairer.repaired,
            corrected_closes=frames.corrected,
            arbitrated_closes=repairer.arbitrated,
        )

    def _ticks_published(self) -> int:
        """Live ticks: published as they came, or held during a repair and released after it."""
        return self.frames.ticks + self._repairer.released

    @property
    def rejections(self) -> RejectionCounter:
        """The live per-reason counter (for a metrics exporter)."""
        return self.frames.rejected

    async def run(self) -> NoReturn:
        """Connect, stream and reconnect forever; only cancellation ends it."""
        attempt = 0
        while True:
            ticks_before = self._ticks_published()
            try:
                cause = await self._session()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("market listener: session failed unexpectedly")
                cause = Cause.ERROR
            self._reconnects[cause] += 1
            worked = self._ticks_published() > ticks_before
            if worked:
                attempt = 0  # the connection worked: a later failure starts the backoff afresh
            if cause in _PROMPT_CAUSES and worked:
                # only after a working connection: a server that announces shutdown on every
                # connect would otherwise be hammered in a tight loop
                log.info("market listener: reconnecting now (%s)", cause)
                continue
            delay_secs = self._retry_delay_secs(attempt)
            attempt += 1
            message = f"market listener: {cause}; reconnecting in {delay_secs:.1f} s"
            if cause == Cause.OVERSIZED:  # a flood of them must not flood the log
                self._warnings.warn(Cause.OVERSIZED, message)
            else:
                log.warning("%s", message)
            await self._clock.sleep(delay_secs)

    # -- one connection -------------------------------------------------------------------------

    async def _session(self) -> str:
        self._end_cause = None
        try:
            ws = await connect(
                self.url,
                compression=None,  # Binance sends none; deflate would cost more than it saves
                max_size=MAX_MESSAGE_BYTES,
                max_queue=MAX_QUEUED_FRAMES,
                ping_interval=None,  # the server pings, websockets answers; silence covers the rest
                open_timeout=10,
                # the closing handshake at shutdown comes out of the daemon's 8 s stop budget
                # (under docker stop's 10 s): an exchange being left need not answer politely
                close_timeout=CLOSE_TIMEOUT_SECS,
            )
        except (OSError, WebSocketException, TimeoutError) as exc:
            log.warning("market listener: cannot connect to %s: %r", self.url, exc)
            return Cause.CONNECT_FAILED
        async with ws:
            self._connects += 1
            connected_mono = self._clock.monotonic_secs()
            log.info("market listener: connected (%d streams)", len(self._streams))
            await self._repairer.backfill_missed(until_ms=self._clock.now_ms())
            self.frames.last_frame_mono = self._clock.monotonic_secs()
            repairs = self._repairer.open()
            helpers = [
                asyncio.create_task(self._watch(ws, connected_mono), name="listener:watch"),
                asyncio.create_task(self._repairer.run(repairs), name="listener:repair"),
            ]
            try:
                return await self._drain(ws)
            except ConnectionClosed as exc:
                cause = self._end_cause or Cause.CLOSED
                if cause == Cause.CLOSED and _too_big(exc):
                    cause = Cause.OVERSIZED
                    self.frames.drop(Drop.OVERSIZED, f"a frame over {MAX_MESSAGE_BYTES} bytes")
                elif cause == Cause.CLOSED:
                    log.warning("market listener: connection closed: %r", exc)
                return cause
            finally:
                for task in helpers:
                    task.cancel()
                self._repairer.close()
                await asyncio.wait(helpers)

    async def _drain(self, ws: ClientConnection) -> str:
        """Read frames until the server announces shutdown (other ends raise ConnectionClosed)."""
        on_frame = self.frames.on_frame
        while True:
            if on_frame(await ws.recv(decode=False)):
                log.warning("market listener: server announced shutdown; reconnecting")
                self._end_cause = Cause.SERVER_SHUTDOWN
                return Cause.SERVER_SHUTDOWN

    async def _watch(self, ws: ClientConnection, connected_mono: float) -> None:
        """End the connection on silence, or rotate it before the 24 h cut."""
        try:
            rotate_at = connected_mono + self._rotate_after_secs
            while True:
                now = self._clock.monotonic_secs()
                silent_secs = now - self.frames.last_frame_mono
                if silent_secs >= self._silence_timeout_secs:
                    log.warning("market listener: no frame for %.1f s; reconnecting", silent_secs)
                    self._end_cause = Cause.SILENCE
                    ws.transport.abort()  # a dead peer would not answer a closing handshake
                    return
                wait_secs = self._silence_timeout_secs - silent_secs
                if now >= rotate_at:
                    quiet_in_secs = self._secs_to_quiet()
                    if quiet_in_secs <= 0:
                        log.info("market listener: rotating the connection before the 24 h cut")
                        self._end_cause = Cause.ROTATE
                        await ws.close()
                        return
                    wait_secs = min(wait_secs, quiet_in_secs)
                else:
                    wait_secs = min(wait_secs, rotate_at - now)
                # a floor: float rounding can leave a remainder too small to move the clock
                await self._clock.sleep(max(wait_secs, MIN_WATCH_SLEEP_SECS))
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("market listener: watcher failed; dropping the connection")
            self._end_cause = Cause.ERROR
            ws.transport.abort()

    def _secs_to_quiet(self) -> float:
        """Clock seconds until we are at least the margin away from the nearest candle boundary."""
        margin_ms = min(ROTATE_QUIET_MARGIN_MS, self._min_step_ms // 4)
        into_ms = self._clock.now_ms() % self._min_step_ms
        if margin_ms <= into_ms <= self._min_step_ms - margin_ms:
            return 0.0
        if into_ms < margin_ms:
            return (margin_ms - into_ms) / 1000.0
        return (self._min_step_ms - into_ms + margin_ms) / 1000.0

    def _retry_delay_secs(self, attempt: int) -> float:
        return self._reconnect.delay_secs(attempt, self._rng.random())


def _too_big(exc: ConnectionClosed) -> bool:
    """websockets closed the connection itself because a frame exceeded ``max_size``."""
    return exc.sent is not None and exc.sent.code == CloseCode.MESSAGE_TOO_BIG


__all__ = ["DEFAULT_TIMEFRAMES", "MAX_MESSAGE_BYTES", "MarketListener"]
