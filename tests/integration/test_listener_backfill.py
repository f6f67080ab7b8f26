"""MarketListener's backfill and close repair against a scripted websocket server and a fake REST
backfill (real sockets, virtual time): backfill before live ticks, failing backfills, lost or
never-seen closes fetched by REST, live closes waiting for older repairs."""

from __future__ import annotations

import asyncio

from listener_support import (
    EPOCH,
    STEP,
    T0,
    FakeBackfill,
    ScriptedServer,
    Ticks,
    candle_series,
    hold,
    kline_frame,
    make_listener,
    running,
    send_all,
    wait_until,
)
from websockets.asyncio.server import ServerConnection

from core.bus import EventBus
from core.clock import VirtualClock
from core.events import MarketTick
from market.listener import MarketListener


async def test_backfill_runs_after_connect_and_before_live_ticks() -> None:
    clock, bus = VirtualClock(EPOCH), EventBus()
    ticks = Ticks(bus)
    history = candle_series([101.0, 102.0, 103.0, 104.0], start_ms=T0)  # opens T0 .. T0+3*STEP
    backfill = FakeBackfill(history[1:])
    first = send_all(
        kline_frame(open_ms=T0, event_ms=T0 + 1_000),
        kline_frame(open_ms=T0, event_ms=T0 + STEP - 1, c="101.0", closed=True),
        then=None,  # the server hangs up
    )
    live_open = T0 + 4 * STEP
    sent = asyncio.Event()

    async def mark_sent(ws: ServerConnection) -> None:
        sent.set()
        await hold(ws)

    second = send_all(
        kline_frame(open_ms=T0 + 3 * STEP, event_ms=live_open - 1, c="104.0", closed=True),
        kline_frame(open_ms=live_open, event_ms=live_open + 1_000),
        then=mark_sent,
    )
    async with ScriptedServer(clock, first, second) as server:
        listener = make_listener(clock, bus, server.url, backfill=backfill)
        backfill.on_call = lambda: calls_seen.append(server.opened)
        calls_seen: list[int] = []
        async with running(listener):
            await wait_until(lambda: listener.stats.reconnects.get("closed") == 1)
            backfill.release.clear()  # hold the backfill: the live frames must wait behind it
            # the outage lasts until 1 s into candle 4: candles 1, 2 and 3 closed meanwhile
            await clock.advance((T0 + 4 * STEP + 1_000 - EPOCH) / 1000)
            await wait_until(lambda: len(backfill.calls) == 1, what="backfill call")
            await wait_until(sent.is_set, what="live frames sent during the backfill")
            assert [t.closed for t in ticks.ticks] == [False, True]  # nothing published yet
            backfill.release.set()
            await wait_until(lambda: len(ticks.ticks) == 6, what="backfill then live")
    assert calls_seen == [2]  # the new connection was open when the backfill ran
    assert backfill.calls == [("BTC/USDT", "15m", T0 + STEP, clock.now_ms())]
    assert ticks.summary() == [
        ("BTC/USDT", "15m", T0, False),
        ("BTC/USDT", "15m", T0, True),
        ("BTC/USDT", "15m", T0 + STEP, True),  # backfilled
        ("BTC/USDT", "15m", T0 + 2 * STEP, True),  # backfilled
        ("BTC/USDT", "15m", T0 + 3 * STEP, True),  # backfilled, and then live too: dropped
        ("BTC/USDT", "15m", live_open, False),
    ]
    stats = listener.stats
    assert stats.backfilled == 3 and stats.rejected == {"duplicate": 1}


async def _run_with_failing_backfill(
    failures: int,
) -> tuple[list[MarketTick], FakeBackfill, MarketListener]:
    """Resume 30 min back, connect, and let the backfill fail ``failures`` times."""
    clock, bus = VirtualClock(EPOCH), EventBus()
    ticks = Ticks(bus)
    live = send_all(kline_frame(open_ms=T0, event_ms=EPOCH + 1))
    backfill = FakeBackfill(candle_series([101.0], start_ms=T0 - STEP), failures=failures)
    async with ScriptedServer(clock, live) as server:
        listener = make_listener(
            clock, bus, server.url, backfill=backfill, silence_timeout_secs=10_000
        )
        listener.resume_from("BTC/USDT", "15m", T0 - 2 * STEP)  # known up to 30 min ago
        async with running(listener):
            while len(ticks.ticks) < 2:  # each failed attempt sleeps a backoff on the clock
                calls = len(backfill.calls)
                await wait_until(
                    lambda n=calls: len(backfill.calls) > n or len(ticks.ticks) == 2  # type: ignore[misc]
                )
                if len(ticks.ticks) < 2:
                    await wait_until(lambda: clock.pending_sleepers >= 1)
                    await clock.advance(60.0)  # past any retry delay (capped at 60 s)
    return ticks.ticks, backfill, listener


async def test_backfill_failures_are_retried_before_live_data() -> None:
    ticks, backfill, listener = await _run_with_failing_backfill(failures=2)
    assert [(t.open_time_ms, t.closed) for t in ticks] == [(T0 - STEP, True), (T0, False)]
    assert len(backfill.calls) == 3
    assert listener.stats.backfill_failures == 0 and listener.stats.backfilled == 1


async def test_a_backfill_that_keeps_failing_does_not_block_live_data() -> None:
    """Three failures at connect: give up, stream live; the first live frame shows the close is
    still missing, so it is fetched again (and this time the source answers)."""
    ticks, backfill, listener = await _run_with_failing_backfill(failures=5)
    assert [(t.open_time_ms, t.closed) for t in ticks] == [(T0, False), (T0 - STEP, True)]
    assert len(backfill.calls) == 6
    stats = listener.stats
    assert (stats.backfill_failures, stats.missed_closes, stats.repaired_closes) == (1, 1, 1)
    assert stats.reconnects == {}


async def test_a_lost_close_frame_is_fetched_by_rest() -> None:
    clock, bus = VirtualClock(EPOCH), EventBus()
    ticks = Ticks(bus)
    closed = candle_series([101.0], start_ms=T0)
    backfill = FakeBackfill(closed)
    frames = send_all(
        kline_frame(open_ms=T0, event_ms=T0 + 1_000),
        kline_frame(open_ms=T0 + STEP, event_ms=T0 + STEP + 1_000),  # T0's close never came
    )
    async with ScriptedServer(clock, frames) as server:
        listener = make_listener(clock, bus, server.url, backfill=backfill)
        async with running(listener):
            await clock.advance(STEP * 2 / 1000)
            await wait_until(lambda: len(ticks.ticks) == 3, what="repaired close")
    assert ticks.summary()[2] == ("BTC/USDT", "15m", T0, True)
    stats = listener.stats
    assert (stats.missed_closes, stats.repaired_closes) == (1, 1)
    assert backfill.calls[0][2] == T0


async def test_closes_never_seen_at_all_are_fetched_even_when_rest_lags() -> None:
    """After a stall the stream resumes two candles later: both closes in between are fetched,
    retrying while the REST source does not have them yet."""
    clock, bus = VirtualClock(T0 + 2 * STEP + 5_000), EventBus()
    ticks = Ticks(bus)
    backfill = FakeBackfill(candle_series([101.0, 102.0], start_ms=T0), lagging_calls=2)
    frames = send_all(kline_frame(open_ms=T0 + 2 * STEP, event_ms=T0 + 2 * STEP + 2_000))
    async with ScriptedServer(clock, frames) as server:
        listener = make_listener(clock, bus, server.url, backfill=backfill)
        listener.resume_from("BTC/USDT", "15m", T0 - STEP)  # known up to the candle before T0
        async with running(listener):
            # the connect-time backfill and the first repair call both come back empty
            await wait_until(lambda: len(backfill.calls) == 2, what="first repair call")
            await wait_until(lambda: clock.pending_sleepers == 2)  # repair retry + watcher
            await clock.step()
            await wait_until(lambda: len(ticks.ticks) == 3, what="repaired closes")
    assert ticks.summary() == [
        ("BTC/USDT", "15m", T0 + 2 * STEP, False),
        ("BTC/USDT", "15m", T0, True),
        ("BTC/USDT", "15m", T0 + STEP, True),
    ]
    assert [call[2] for call in backfill.calls] == [T0, T0, T0]
    stats = listener.stats
    assert (stats.missed_closes, stats.repaired_closes, stats.backfilled) == (2, 2, 2)


async def test_a_live_close_waits_for_the_repair_of_an_older_one() -> None:
    """The next candle's close arrives while an older lost close is still being fetched: the
    newer close is held and published after the repair, so every close arrives in order."""
    clock, bus = VirtualClock(EPOCH), EventBus()
    ticks = Ticks(bus)
    backfill = FakeBackfill(candle_series([101.0], start_ms=T0))
    backfill.release.clear()  # the repair's REST call hangs until the live close is in
    frames = send_all(
        kline_frame(open_ms=T0, event_ms=T0 + 1_000),
        kline_frame(open_ms=T0 + STEP, event_ms=T0 + STEP + 1_000),  # T0's close never came
        kline_frame(open_ms=T0 + STEP, event_ms=T0 + 2 * STEP - 1, closed=True),
    )
    async with ScriptedServer(clock, frames) as server:
        listener = make_listener(clock, bus, server.url, backfill=backfill)
        async with running(listener):
            await clock.advance(STEP * 2 / 1000)
            await wait_until(lambda: listener.stats.frames == 3, what="the live close")
            await wait_until(lambda: len(backfill.calls) == 1, what="the repair call")
            assert [t.closed for t in ticks.ticks] == [False, False]  # the close is held
            backfill.release.set()
            await wait_until(lambda: len(ticks.ticks) == 4, what="repair, then the held close")
    assert ticks.summary()[2:] == [
        ("BTC/USDT", "15m", T0, True),
        ("BTC/USDT", "15m", T0 + STEP, True),
    ]
    assert (listener.stats.missed_closes, listener.stats.repaired_closes) == (1, 1)


async def test_a_repair_cut_short_by_a_reconnect_is_finished_by_the_next_backfill() -> None:
    """The connection ends while an older lost close is still being fetched and a newer live close
    is held: the held close must not be published past the gap (the next connection's backfill
    starts after the newest published close, so the lost one would never be fetched)."""
    clock, bus = VirtualClock(EPOCH), EventBus()
    ticks = Ticks(bus)
    backfill = FakeBackfill(candle_series([101.0, 102.0], start_ms=T0))
    backfill.release.clear()  # the repair's REST call hangs until the connection is gone
    frames = send_all(
        kline_frame(open_ms=T0, event_ms=T0 + 1_000),
        kline_frame(open_ms=T0 + STEP, event_ms=T0 + STEP + 1_000),  # T0's close never came
        kline_frame(open_ms=T0 + STEP, event_ms=T0 + 2 * STEP - 1, closed=True),
        then=None,  # and the server hangs up
    )
    async with ScriptedServer(clock, frames) as server:
        listener = make_listener(clock, bus, server.url, backfill=backfill)
        listener.resume_from("BTC/USDT", "15m", T0 - STEP)  # seeded up to the candle before T0
        async with running(listener):
            await wait_until(lambda: listener.stats.reconnects.get("closed") == 1, what="hang-up")
            assert len(backfill.calls) == 1  # the repair, cut short
            await clock.advance(STEP * 2 / 1000)  # both candles have closed by the reconnect
            backfill.release.set()
            await wait_until(lambda: sum(t.closed for t in ticks.ticks) >= 2, what="both closes")
    closes = [(t.open_time_ms, t.closed) for t in ticks.ticks if t.closed]
    assert closes == [(T0, True), (T0 + STEP, True)]
