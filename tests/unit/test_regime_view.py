"""RegimeView: a decision's snapshot sees the regime refresh of every 4h close observed before it.

The refresh (history, then a fit in a worker thread) runs in a queued bus handler, concurrently with
the decision the same close triggers; without the ordering the snapshot read whichever regime had
finished first, so the decision depended on machine speed (replay vs simulator parity).
"""

from __future__ import annotations

import asyncio

import pandas as pd
import pytest
from test_regime_tracker import EPOCH_MS, FakeModel, frame_of

from core.bus import EventBus
from core.clock import VirtualClock
from core.events import Candle, CandleClosed, Timeframe, Topic
from regime.macro import MacroRegime
from regime.tracker import CryptoRegimeTracker
from regime.view import DEFAULT_REFRESH_WAIT_SECS, RegimeView

TICKER = "BTC/USDT"
FOUR_HOURS_MS = 14_400_000


class FakeHistory:
    timeframe = "4h"

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail

    async def on_candle_closed(self, event: object) -> None:
        if self.fail:
            raise RuntimeError("history fetch failed")

    def frame(self, ticker: str) -> pd.DataFrame:
        return frame_of(10)


class NoMacro:
    async def current(self) -> MacroRegime:
        return MacroRegime.unavailable("no key", source="none")


class Gate:
    """An offload that holds every fit until ``open`` is set (a slow worker thread)."""

    def __init__(self) -> None:
        self.open = asyncio.Event()

    async def __call__(self, fn, /, *args, **kwargs):  # type: ignore[no-untyped-def]
        await self.open.wait()
        return fn(*args, **kwargs)


def _close(open_ms: int, timeframe: Timeframe = "4h") -> CandleClosed:
    candle = Candle(open_time_ms=open_ms, open=1.0, high=1.0, low=1.0, close=1.0, volume=1.0)
    return CandleClosed(ticker=TICKER, timeframe=timeframe, candle=candle)


def _view(clock: VirtualClock, gate: Gate, history: FakeHistory | None = None) -> RegimeView:
    tracker = CryptoRegimeTracker(clock, FakeModel, offload=gate)
    history = history or FakeHistory()
    return RegimeView(tracker, NoMacro(), history, [TICKER], clock=clock)  # type: ignore[arg-type]


async def _settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def test_the_snapshot_waits_for_the_refresh_of_an_observed_4h_close() -> None:
    clock = VirtualClock(epoch_ms=EPOCH_MS)
    gate = Gate()
    view = _view(clock, gate)
    bus = EventBus()
    bus.subscribe(Topic.CANDLE_CLOSED, view.on_close_observed)
    bus.subscribe_queued(Topic.CANDLE_CLOSED, view.on_candle_closed)
    consumers = asyncio.create_task(bus.run())
    try:
        bus.publish(_close(EPOCH_MS))
        snapshot = asyncio.create_task(view.snapshot())  # the decision the close triggered
        await _settle()
        assert not snapshot.done(), "the snapshot did not wait for the regime refresh"
        gate.open.set()
        regime = await snapshot
    finally:
        consumers.cancel()
    assert regime.crypto[TICKER] == "high_volatility"  # the new regime, not "unknown"
    assert not any("previous regime used" in n for n in regime.notes)


async def test_a_refresh_past_the_wait_falls_back_to_the_previous_regime_with_a_reason() -> None:
    clock = VirtualClock(epoch_ms=EPOCH_MS)
    gate = Gate()
    view = _view(clock, gate)
    event = _close(EPOCH_MS)
    view.on_close_observed(event)
    refresh = asyncio.create_task(view.on_candle_closed(event))
    snapshot = asyncio.create_task(view.snapshot())
    await clock.advance(DEFAULT_REFRESH_WAIT_SECS - 1)
    assert not snapshot.done()
    await clock.advance(1)
    regime = await snapshot
    assert regime.crypto[TICKER] == "unknown"  # what the tracker had before the close
    assert any(n.startswith(f"{TICKER}: regime refresh") and "previous regime used" in n
               for n in regime.notes), regime.notes  # fmt: skip
    # the refresh still lands; the next snapshot has it without waiting
    gate.open.set()
    await refresh
    assert (await view.snapshot()).crypto[TICKER] == "high_volatility"


async def test_no_wait_without_a_pending_4h_close() -> None:
    clock = VirtualClock(epoch_ms=EPOCH_MS)
    view = _view(clock, Gate())
    view.on_close_observed(_close(EPOCH_MS, timeframe="15m"))  # not the regime's timeframe
    regime = await asyncio.wait_for(view.snapshot(), timeout=5)
    assert regime.crypto[TICKER] == "unknown"


async def test_a_failed_refresh_is_not_pending_any_more() -> None:
    clock = VirtualClock(epoch_ms=EPOCH_MS)
    view = _view(clock, Gate(), FakeHistory(fail=True))
    event = _close(EPOCH_MS)
    view.on_close_observed(event)
    with pytest.raises(RuntimeError):
        await view.on_candle_closed(event)
    regime = await asyncio.wait_for(view.snapshot(), timeout=5)  # no clock time passes here
    assert not any("previous regime used" in n for n in regime.notes)


async def test_only_closes_observed_before_the_snapshot_are_waited_for() -> None:
    clock = VirtualClock(epoch_ms=EPOCH_MS)
    gate = Gate()
    gate.open.set()
    view = _view(clock, gate)
    first = _close(EPOCH_MS)
    view.on_close_observed(first)
    await view.on_candle_closed(first)
    snapshot = await asyncio.wait_for(view.snapshot(), timeout=5)
    assert snapshot.crypto[TICKER] == "high_volatility"
