"""MarketListener's connection against a scripted websocket server on loopback (real sockets,
virtual time): one connection for all streams, bad frames, silence, server shutdown, backoff and
rotation."""

from __future__ import annotations

import logging
import random

import orjson
import pytest
from listener_support import (
    EPOCH,
    STEP,
    T0,
    ScriptedServer,
    Ticks,
    hold,
    kline_frame,
    make_listener,
    running,
    send_all,
    wait_until,
)

from core.backoff import backoff_delay_secs
from core.bus import EventBus
from core.clock import VirtualClock
from market.listener_streams import Cause


async def test_one_connection_for_all_streams_and_ticks_in_order() -> None:
    clock, bus = VirtualClock(EPOCH), EventBus()
    ticks = Ticks(bus)
    frames = [
        kline_frame(ticker="BTC/USDT", interval="15m", event_ms=T0 + 1_000),
        kline_frame(ticker="ETH/USDT", interval="1h", event_ms=T0 + 1_100),
        kline_frame(ticker="BTC/USDT", interval="15m", event_ms=T0 + 2_000, c="106.0"),
        kline_frame(ticker="BTC/USDT", interval="15m", event_ms=T0 + 899_999, closed=True),
    ]
    async with ScriptedServer(clock, send_all(*frames)) as server:
        listener = make_listener(
            clock, bus, server.url, tickers=["BTC/USDT", "ETH/USDT"], timeframes=["15m", "1h"]
        )
        async with running(listener):
            await wait_until(lambda: len(ticks.ticks) == 4, what="4 ticks")
            assert server.paths == [
                "/market/stream?streams=btcusdt@kline_15m/btcusdt@kline_1h/"
                "ethusdt@kline_15m/ethusdt@kline_1h"
            ]
            assert ticks.summary() == [
                ("BTC/USDT", "15m", T0, False),
                ("ETH/USDT", "1h", T0, False),
                ("BTC/USDT", "15m", T0, False),
                ("BTC/USDT", "15m", T0, True),
            ]
            stats = listener.stats
            assert (stats.connects, stats.frames, stats.ticks_published) == (1, 4, 4)
            assert stats.rejected == {} and stats.reconnects == {}
            assert stats.last_frame_at_ms == EPOCH  # virtual time did not move


async def test_bad_frames_are_dropped_counted_and_logged_with_rate_limit(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock, bus = VirtualClock(EPOCH), EventBus()
    ticks = Ticks(bus)
    good = [kline_frame(event_ms=T0 + i * 1_000, c=f"{100 + i}.0") for i in range(1, 4)]
    frames = [
        good[0],
        *[b"garbage {" for _ in range(50)],
        kline_frame(event_ms=T0 + 1_500, c="NaN"),
        kline_frame(event_ms=T0 + 1_500, c="-5"),
        kline_frame(event_ms=T0 + 1_500, v="-1"),
        kline_frame(event_ms=T0 + 1_500, h="80.0"),
        kline_frame(ticker="SOL/USDT", event_ms=T0 + 1_500),  # valid, but not subscribed
        orjson.dumps({"stream": "btcusdt@aggTrade", "data": {"e": "aggTrade", "E": 1}}),
        good[1],
        good[1],  # the same push twice
        good[0],  # event time going backwards
        kline_frame(open_ms=T0 - STEP, event_ms=T0 + 5_000, closed=True),  # an older candle
        good[2],
    ]
    caplog.set_level(logging.WARNING, logger="market.listener")
    async with ScriptedServer(clock, send_all(*frames)) as server:
        listener = make_listener(clock, bus, server.url)
        async with running(listener):
            await wait_until(lambda: listener.stats.frames == len(frames), what="all frames")
    assert [t.close for t in ticks.ticks] == [101.0, 102.0, 103.0]
    stats = listener.stats
    assert stats.rejected == {
        "malformed": 50,
        "non_finite": 1,
        "non_positive_price": 1,
        "negative_volume": 1,
        "inconsistent": 1,
        "unexpected_stream": 1,
        "not_kline": 1,
        "duplicate": 1,
        "out_of_order": 2,
    }
    assert stats.connects == 1 and stats.reconnects == {}
    malformed_lines = [r for r in caplog.records if "(malformed:" in r.getMessage()]
    assert len(malformed_lines) == 1  # 50 bad frames, one line (rate limited)


async def test_silence_reconnects_after_the_timeout_in_clock_time() -> None:
    clock, bus = VirtualClock(EPOCH), EventBus()
    ticks = Ticks(bus)
    first = send_all(kline_frame(event_ms=T0 + 1_000))  # then silent, connection kept open
    second = send_all(kline_frame(event_ms=T0 + 40_000, c="107.0"))
    async with ScriptedServer(clock, first, second) as server:
        listener = make_listener(clock, bus, server.url, silence_timeout_secs=30)
        async with running(listener):
            await wait_until(lambda: len(ticks.ticks) == 1, what="first tick")
            await clock.advance(29.0)
            assert listener.stats.reconnects == {}
            await clock.advance(1.5)
            await wait_until(lambda: listener.stats.reconnects.get("silence") == 1)
            # a stalled peer is dropped, then the backoff sleep (base 1 s, jittered) runs
            await clock.advance(1.0)
            await wait_until(lambda: len(ticks.ticks) == 2, what="tick after reconnect")
            assert server.opened == 2 and listener.stats.connects == 2


async def test_server_shutdown_reconnects_at_once() -> None:
    clock, bus = VirtualClock(EPOCH), EventBus()
    ticks = Ticks(bus)
    first = send_all(
        kline_frame(event_ms=T0 + 1_000),
        orjson.dumps({"e": "serverShutdown", "E": T0 + 1_500}),
    )
    second = send_all(kline_frame(event_ms=T0 + 2_000, c="107.0"))
    async with ScriptedServer(clock, first, second) as server:
        listener = make_listener(clock, bus, server.url)
        async with running(listener):
            await wait_until(lambda: len(ticks.ticks) == 2, what="tick on the new connection")
            assert listener.stats.reconnects == {Cause.SERVER_SHUTDOWN: 1}
            assert clock.monotonic_secs() == 0.0  # no backoff sleep was needed
            assert server.opened == 2


async def test_a_server_that_only_announces_shutdown_is_not_hammered() -> None:
    """Prompt reconnects are for connections that worked; a server announcing shutdown on every
    connect, before any data, gets the ordinary backoff."""
    clock, bus = VirtualClock(EPOCH), EventBus()
    shutdown = send_all(orjson.dumps({"e": "serverShutdown", "E": EPOCH}), then=hold)
    async with ScriptedServer(clock, shutdown, shutdown) as server:
        listener = make_listener(clock, bus, server.url)
        async with running(listener):
            await wait_until(lambda: listener.stats.reconnects.get("server_shutdown") == 1)
            await wait_until(lambda: clock.pending_sleepers == 1)  # backing off, not reconnecting
            assert len(server.attempts_at) == 1
            await clock.step()
            await wait_until(lambda: listener.stats.reconnects.get("server_shutdown") == 2)
    assert server.attempts_at[1] > server.attempts_at[0] == 0.0


async def test_backoff_grows_on_failures_and_resets_after_a_healthy_connection() -> None:
    clock, bus = VirtualClock(EPOCH), EventBus()
    ticks = Ticks(bus)
    closes_after_a_tick = send_all(kline_frame(event_ms=T0 + 1_000), then=None)
    async with ScriptedServer(clock, closes_after_a_tick, reject_first=3) as server:
        listener = make_listener(clock, bus, server.url, rng=random.Random(11))
        expected_rng = random.Random(11)
        async with running(listener):
            for tries in range(1, 5):
                await wait_until(lambda n=tries: len(server.attempts_at) == n)  # type: ignore[misc]
                await wait_until(lambda: clock.pending_sleepers > 0)
                await clock.step()
            await wait_until(lambda: listener.stats.reconnects.get("closed") == 1)
            await wait_until(lambda: clock.pending_sleepers > 0)
            await clock.step()
            await wait_until(lambda: len(server.attempts_at) == 5)
    gaps = [b - a for a, b in zip(server.attempts_at, server.attempts_at[1:], strict=False)]
    # three refusals back off for attempts 0, 1, 2; the 4th attempt connects and delivers a
    # tick, so when that connection closes the backoff starts again from attempt 0
    attempts = [0, 1, 2, 0]
    expected = [backoff_delay_secs(n, 1.0, 60.0, 0.5, expected_rng.random()) for n in attempts]
    assert gaps == pytest.approx(expected)
    assert expected[2] > expected[3]
    assert listener.stats.reconnects == {"connect_failed": 3, "closed": 1}
    assert len(ticks.ticks) == 1


async def test_rotation_waits_for_a_quiet_moment_and_reconnects_at_once() -> None:
    # at 100 s of virtual time the clock reads 30 s before a 15m boundary: rotation waits until
    # 60 s past it, i.e. 90 s more
    epoch = T0 + STEP - 100_000 - 30_000
    clock, bus = VirtualClock(epoch), EventBus()
    async with ScriptedServer(clock, send_all(kline_frame(event_ms=T0 + 1_000))) as server:
        listener = make_listener(
            clock, bus, server.url, rotate_after_secs=100, silence_timeout_secs=10_000
        )
        async with running(listener):
            await wait_until(lambda: listener.stats.ticks_published == 1)
            await clock.advance(150.0)
            assert server.opened == 1
            await clock.advance(40.5)
            await wait_until(lambda: server.opened == 2, what="rotated connection")
            assert listener.stats.reconnects == {Cause.ROTATE: 1}
