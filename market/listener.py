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

Bad frames (malformed, non-finite, negative, inconsistent, out of order, duplicate) are dropped and
counted by reason, with rate-limited warnings. Binance sends a candle's close before the next
candle's first update, so a stream that starts a new candle while earlier closes are still missing
(a stall, or a reconnect just after a close went out) lost them: the listener fetches them by REST,
retrying briefly while REST catches up; what stays missing is reported as a gap by the aggregator.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Final, NamedTuple, NoReturn

from pydantic import BaseModel, ConfigDict
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, WebSocketException
from websockets.frames import CloseCode

from core.backoff import Backoff
from core.bus import EventBus
from core.clock import Clock
from core.events import Candle, MarketTick, Timeframe
from market.guard import FrameGuard, FrameGuardConfig, RejectionCounter
from market.parse import FrameRejected, ServerShutdown, kline_stream_name, parse_frame
from market.ports import CandleBackfill
from market.timeframes import timeframe_ms, to_binance_symbol

log = logging.getLogger(__name__)

DEFAULT_TIMEFRAMES: Final[tuple[Timeframe, ...]] = ("15m", "1h", "4h")
JITTER_FRACTION: Final = 0.5
#: frames the websocket buffers while the backfill runs (Binance pushes ~4 per stream per second)
MAX_QUEUED_FRAMES: Final = 4096
MAX_MESSAGE_BYTES: Final = 1 << 20
#: rotation avoids this close to a candle boundary (where a close frame may be in flight)
ROTATE_QUIET_MARGIN_MS: Final = 60_000
WARN_INTERVAL_SECS: Final = 60.0
MIN_WATCH_SLEEP_SECS: Final = 0.001


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
    """Listener-level drop reasons, next to ``parse.RejectReason``."""

    OUT_OF_ORDER = "out_of_order"
    DUPLICATE = "duplicate"
    UNEXPECTED_STREAM = "unexpected_stream"
    NOT_KLINE = "not_kline"
    PARSE_ERROR = "parse_error"  # the parser raised something unexpected (a bug): see the log
    OVERSIZED = "oversized"  # over MAX_MESSAGE_BYTES; costs a reconnect


_PROMPT_CAUSES: Final = frozenset({Cause.ROTATE, Cause.SERVER_SHUTDOWN})


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


class _Stream:
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


class _Warnings:
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
        self._bus = bus
        self._backfill = backfill
        self._silence_timeout_secs = silence_timeout_secs
        self._rotate_after_secs = rotate_after_secs
        self._reconnect = Backoff(
            base_secs=reconnect_base_secs,
            cap_secs=reconnect_cap_secs,
            jitter_fraction=JITTER_FRACTION,
        )
        self._rng = rng or random.Random()
        self._backfill_attempts = backfill_attempts
        self._streams: dict[tuple[str, str], _Stream] = {
            (ticker, tf): _Stream(ticker, tf) for ticker in tickers for tf in timeframes
        }
        names = [
            kline_stream_name(to_binance_symbol(ticker), tf)
            for ticker in tickers
            for tf in timeframes
        ]
        self.url = f"{base_url.rstrip('/')}{path}?streams={'/'.join(names)}"
        self._min_step_ms = min(timeframe_ms(tf) for tf in timeframes)
        self._warnings = _Warnings(clock, WARN_INTERVAL_SECS)
        self._end_cause: str | None = None
        self._last_frame_mono = -math.inf
        self._repairs: asyncio.Queue[_Repair] | None = None
        self.guard = FrameGuard(clock, guard, reference_price=reference_price)
        # counters (read through ``stats``)
        self._connects = 0
        self._frames = 0
        self._ticks = 0
        self._rejected = RejectionCounter()
        self._reconnects: Counter[str] = Counter()
        self._backfilled = 0
        self._backfill_failures = 0
        self._missed_closes = 0
        self._repaired = 0
        self._corrected = 0
        self._arbitrated = 0

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
        last_frame_at_ms = None
        if self._frames:
            ago_secs = self._clock.monotonic_secs() - self._last_frame_mono
            last_frame_at_ms = self._clock.now_ms() - round(ago_secs * 1000.0)
        return ListenerStats(
            connects=self._connects,
            frames=self._frames,
            ticks_published=self._ticks,
            rejected=self._rejected.as_dict(),
            reconnects=dict(self._reconnects),
            last_frame_at_ms=last_frame_at_ms,
            backfilled=self._backfilled,
            backfill_failures=self._backfill_failures,
            missed_closes=self._missed_closes,
            repaired_closes=self._repaired,
            corrected_closes=self._corrected,
            arbitrated_closes=self._arbitrated,
        )

    @property
    def rejections(self) -> RejectionCounter:
        """The live per-reason counter (for a metrics exporter)."""
        return self._rejected

    async def run(self) -> NoReturn:
        """Connect, stream and reconnect forever; only cancellation ends it."""
        attempt = 0
        while True:
            ticks_before = self._ticks
            try:
                cause = await self._session()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("market listener: session failed unexpectedly")
                cause = Cause.ERROR
            self._reconnects[cause] += 1
            worked = self._ticks > ticks_before
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
                close_timeout=5,
            )
        except (OSError, WebSocketException, TimeoutError) as exc:
            log.warning("market listener: cannot connect to %s: %r", self.url, exc)
            return Cause.CONNECT_FAILED
        async with ws:
            self._connects += 1
            connected_mono = self._clock.monotonic_secs()
            log.info("market listener: connected (%d streams)", len(self._streams))
            await self._backfill_missed(until_ms=self._clock.now_ms())
            self._last_frame_mono = self._clock.monotonic_secs()
            self._repairs = asyncio.Queue()
            helpers = [
                asyncio.create_task(self._watch(ws, connected_mono), name="listener:watch"),
                asyncio.create_task(self._repair_loop(self._repairs), name="listener:repair"),
            ]
            try:
                return await self._drain(ws)
            except ConnectionClosed as exc:
                cause = self._end_cause or Cause.CLOSED
                if cause == Cause.CLOSED and _too_big(exc):
                    cause = Cause.OVERSIZED
                    self._drop(Drop.OVERSIZED, f"a frame over {MAX_MESSAGE_BYTES} bytes")
                elif cause == Cause.CLOSED:
                    log.warning("market listener: connection closed: %r", exc)
                return cause
            finally:
                self._repairs = None
                for task in helpers:
                    task.cancel()
                for stream in self._streams.values():  # pending repairs end with the connection
                    if stream.repair_to_ms >= 0:
                        # publishing the held closes now would step past the unrepaired gap, and
                        # the next connection's backfill starts after the newest published close:
                        # drop them instead; that backfill fetches the gap and them, in order
                        stream.repair_to_ms = -1
                        stream.held_closes = []
                await asyncio.wait(helpers)

    async def _drain(self, ws: ClientConnection) -> str:
        """Read frames until the server announces shutdown (other ends raise ConnectionClosed)."""
        on_frame = self.on_frame
        while True:
            if on_frame(await ws.recv(decode=False)):
                log.warning("market listener: server announced shutdown; reconnecting")
                self._end_cause = Cause.SERVER_SHUTDOWN
                return Cause.SERVER_SHUTDOWN

    def on_frame(self, raw: bytes | str) -> bool:
        """Take one frame: publish it, or drop and count it. True when it announces a shutdown.

        Nothing a frame holds may raise out of here: one bad frame must never end the feed."""
        self._frames += 1
        self._last_frame_mono = self._clock.monotonic_secs()
        try:
            message = parse_frame(raw)
            if type(message) is MarketTick:
                stream = self._streams.get((message.ticker, message.timeframe))
                if stream is None:
                    self._drop(Drop.UNEXPECTED_STREAM, f"{message.ticker} {message.timeframe}")
                    return False
                self.guard.check(message)
                if self._in_order(stream, message):
                    self._publish_live(stream, message)
                return False
        except FrameRejected as exc:
            self._drop(exc.reason, exc.detail)
            return False
        except Exception as exc:  # a parser bug must not take the feed down with it
            self._drop(Drop.PARSE_ERROR, repr(exc))
            return False
        if type(message) is ServerShutdown:
            return True
        self._drop(Drop.NOT_KLINE, f"unsubscribed {type(message).__name__}")
        return False

    def _publish_live(self, stream: _Stream, tick: MarketTick) -> None:
        if tick.closed and stream.repair_to_ms >= 0:
            stream.held_closes.append(tick)
            return
        if tick.closed:
            stream.note_closed(tick.open_time_ms)
            stream.last_close = tick
        self._ticks += 1
        self._bus.publish(tick)

    def _in_order(self, stream: _Stream, tick: MarketTick) -> bool:
        """Accept a live tick unless it is older than, or repeats, what the stream already said."""
        open_ms, event_ms = tick.open_time_ms, tick.event_time_ms
        if open_ms < stream.last_open_ms or event_ms < stream.last_event_ms:
            self._drop(
                Drop.OUT_OF_ORDER, f"{tick.ticker} {tick.timeframe} t={open_ms} E={event_ms}"
            )
            return False
        if open_ms == stream.last_open_ms:
            if stream.open_closed and tick.closed and self._corrects(stream, tick):
                pass  # a later close that says something else: it corrects the one published
            elif stream.open_closed or (event_ms == stream.last_event_ms and not tick.closed):
                self._drop(Drop.DUPLICATE, f"{tick.ticker} {tick.timeframe} t={open_ms}")
                return False
        else:
            self._check_closes_before(stream, open_ms)
        stream.last_open_ms = open_ms
        stream.last_event_ms = event_ms
        stream.open_closed = tick.closed
        return True

    def _corrects(self, stream: _Stream, tick: MarketTick) -> bool:
        """A second close of the newest candle, with other values: the exchange corrected it
        (or one of the two is wrong). It is published as a correction, and REST, when there is
        one, settles the candle once; after that only REST's values stand."""
        last = stream.last_close
        if last is None or last.open_time_ms != tick.open_time_ms or _same_candle(last, tick):
            return False
        if stream.arbitrated_open_ms == tick.open_time_ms:
            return False
        self._corrected += 1
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
        if self._backfill is not None and self._repairs is not None:
            stream.arbitrated_open_ms = tick.open_time_ms  # one REST look per candle
            self._repairs.put_nowait(_Repair(stream, tick.open_time_ms, tick.open_time_ms, True))
        return True

    def _check_closes_before(self, stream: _Stream, open_ms: int) -> None:
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
        self._missed_closes += (last_ms - first_ms) // stream.step_ms + 1
        self._warnings.warn(
            "missed_close",
            f"market listener: {stream.ticker} {stream.timeframe} moved to {open_ms} without the "
            f"close(s) of {first_ms}..{last_ms}",
        )
        if self._backfill is not None and self._repairs is not None:
            stream.repair_to_ms = max(stream.repair_to_ms, last_ms)
            self._repairs.put_nowait(_Repair(stream, first_ms, last_ms, False))

    def _drop(self, reason: str, detail: str) -> None:
        self._rejected.add(reason)
        self._warnings.warn(reason, f"market listener: dropped a frame ({reason}: {detail})")

    async def _watch(self, ws: ClientConnection, connected_mono: float) -> None:
        """End the connection on silence, or rotate it before the 24 h cut."""
        try:
            rotate_at = connected_mono + self._rotate_after_secs
            while True:
                now = self._clock.monotonic_secs()
                silent_secs = now - self._last_frame_mono
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

    # -- backfill -------------------------------------------------------------------------------

    async def _backfill_missed(self, until_ms: int) -> None:
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

    async def _repair_loop(self, queue: asyncio.Queue[_Repair]) -> None:
        """Fetch closes that never arrived on the socket (see ``_check_closes_before``), and
        settle conflicting closes (see ``_corrects``)."""
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

    def _release_held(self, stream: _Stream) -> None:
        """Publish the live closes held during a repair, oldest first (the aggregator reports any
        close still missing as a gap)."""
        stream.repair_to_ms = -1
        held, stream.held_closes = stream.held_closes, []
        for tick in held:
            if tick.open_time_ms > stream.last_closed_open_ms:
                stream.note_closed(tick.open_time_ms)
                stream.last_close = tick
                self._ticks += 1
                self._bus.publish(tick)

    async def _arbitrate(self, stream: _Stream, open_ms: int) -> None:
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
        tick = self._close_tick(stream, candle)
        self.guard.note_price(stream.ticker, candle.close)
        last = stream.last_close
        if last is not None and last.open_time_ms == open_ms and _same_candle(last, tick):
            return  # the last correction was right
        if stream.last_closed_open_ms > open_ms:
            return  # newer closes are out: the aggregator only corrects its newest candle
        self._arbitrated += 1
        stream.last_close = tick
        self._bus.publish(tick)

    async def _repair(self, stream: _Stream, first_ms: int, last_ms: int) -> None:
        # the REST side may lag the socket by a moment: ask again until the closes are there
        for attempt in range(self._backfill_attempts):
            if stream.last_closed_open_ms >= last_ms:
                return  # repaired (newer live closes are held until the repair is done)
            since_ms = max(first_ms, stream.last_closed_open_ms + stream.step_ms)
            candles = await self._fetch(stream, since_ms, self._clock.now_ms())
            self._repaired += self._publish_closes(
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

    async def _fetch(self, stream: _Stream, since_ms: int, until_ms: int) -> Sequence[Candle]:
        """Closed candles from the backfill, retried with backoff; empty after the last failure."""
        assert self._backfill is not None
        for attempt in range(self._backfill_attempts):
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
                    self._backfill_attempts,
                    exc,
                )
                if attempt + 1 < self._backfill_attempts:
                    await self._clock.sleep(self._retry_delay_secs(attempt))
        self._backfill_failures += 1
        log.error(
            "market listener: giving up backfilling %s %s from %d; the aggregator will report "
            "the gap",
            stream.ticker,
            stream.timeframe,
            since_ms,
        )
        return ()

    def _retry_delay_secs(self, attempt: int) -> float:
        return self._reconnect.delay_secs(attempt, self._rng.random())

    def _publish_closes(
        self, stream: _Stream, candles: Sequence[Candle], before_open_ms: int | None
    ) -> int:
        published = 0
        for candle in sorted(candles, key=lambda c: c.open_time_ms):
            open_ms = candle.open_time_ms
            if open_ms <= stream.last_closed_open_ms or open_ms % stream.step_ms:
                continue
            if before_open_ms is not None and open_ms >= before_open_ms:
                continue  # the stream is already past it live: only older closes are missing
            tick = self._close_tick(stream, candle)
            self._bus.publish(tick)
            self.guard.note_price(stream.ticker, candle.close)  # REST is trusted
            stream.note_closed(open_ms)
            stream.last_close = tick
            stream.arbitrated_open_ms = open_ms  # REST's close is final: no live correction
            published += 1
        self._backfilled += published
        return published

    @staticmethod
    def _close_tick(stream: _Stream, candle: Candle) -> MarketTick:
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


class _Repair(NamedTuple):
    stream: _Stream
    first_ms: int
    last_ms: int
    arbiter: bool  # settle a conflicting close of first_ms rather than fetch missed ones


def _same_candle(a: MarketTick, b: MarketTick) -> bool:
    return (a.open, a.high, a.low, a.close, a.volume) == (b.open, b.high, b.low, b.close, b.volume)


def _too_big(exc: ConnectionClosed) -> bool:
    """websockets closed the connection itself because a frame exceeded ``max_size``."""
    return exc.sent is not None and exc.sent.code == CloseCode.MESSAGE_TOO_BIG


__all__ = ["DEFAULT_TIMEFRAMES", "Cause", "Drop", "ListenerStats", "MarketListener"]
