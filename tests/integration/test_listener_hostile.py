"""Hostile input over a real socket: oversized frames (a reconnect each, counted, logged once a
minute of clock time) and conflicting closes settled by REST. Scripted loopback server and
virtual clock from ``listener_support``."""

from __future__ import annotations

import logging

import pytest
from listener_support import (
    EPOCH,
    STEP,
    T0,
    FakeBackfill,
    ScriptedServer,
    Ticks,
    candle_series,
    kline_frame,
    make_listener,
    running,
    send_all,
    wait_until,
)

from core.bus import EventBus
from core.clock import VirtualClock
from market.listener import MAX_MESSAGE_BYTES


def _oversized(event_ms: int) -> bytes:
    good = kline_frame(open_ms=T0, event_ms=event_ms)
    return good[:-1] + b" " * MAX_MESSAGE_BYTES + b"}"


async def test_oversized_frames_cost_a_reconnect_each_and_are_logged_once_a_minute(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock, bus = VirtualClock(EPOCH), EventBus()
    ticks = Ticks(bus)
    scripts = [
        send_all(kline_frame(open_ms=T0, event_ms=EPOCH + i), _oversized(EPOCH + i), then=None)
        for i in range(1, 4)
    ]
    caplog.set_level(logging.INFO, logger="market.listener")
    async with ScriptedServer(clock, *scripts) as server:
        listener = make_listener(clock, bus, server.url)
        async with running(listener):
            for opened in (1, 2, 3):

                def ended(n: int = opened) -> bool:
                    return server.opened == n and listener.stats.reconnects.get("oversized") == n

                await wait_until(ended, what=f"connection {opened} ended by its oversized frame")
                await clock.advance(2.0)  # the backoff after a working connection
    stats = listener.stats
    assert stats.rejected == {"oversized": 3}
    assert stats.reconnects == {"oversized": 3}
    assert len(ticks.ticks) == 3  # the good frame of each connection
    oversized_warnings = [
        r for r in caplog.records if r.levelno >= logging.WARNING and "oversized" in r.message
    ]
    assert len(oversized_warnings) == 1  # 3 in 6 s of clock time: one line, not one per frame


async def test_conflicting_closes_are_settled_by_rest() -> None:
    clock, bus = VirtualClock(T0 + STEP + 2_000), EventBus()
    ticks = Ticks(bus)
    rest = candle_series([103.0], start_ms=T0)  # REST's close of the candle
    script = send_all(
        kline_frame(open_ms=T0, event_ms=T0 + STEP, c="101.0", v="0.5", closed=True),
        kline_frame(open_ms=T0, event_ms=T0 + STEP + 9, c="102.0", v="12.5", closed=True),
        kline_frame(open_ms=T0, event_ms=T0 + STEP + 20, c="101.5", v="11.0", closed=True),
    )
    async with ScriptedServer(clock, script) as server:
        listener = make_listener(clock, bus, server.url, backfill=FakeBackfill(rest))
        async with running(listener):
            await wait_until(lambda: listener.stats.arbitrated_closes == 1, what="REST's word")
            await wait_until(lambda: listener.stats.frames == 3, what="all frames")
    assert [(t.close, t.volume) for t in ticks.ticks] == [(101.0, 0.5), (102.0, 12.5), (103.0, 1.0)]
    assert listener.stats.corrected_closes == 1
    assert listener.stats.rejected == {"duplicate": 1}  # after REST settled it
