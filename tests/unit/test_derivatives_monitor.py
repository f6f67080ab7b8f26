"""DerivativesMonitor on a VirtualClock: adaptive cadence, published updates, board, context."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from fakes.tasks import stop_tasks

from agent.snapshot_builder import ContextSource
from core.bus import EventBus
from core.clock import VirtualClock
from core.events import DerivativesUpdate
from derivatives.cache import Cached
from derivatives.config import DerivativesConfig
from derivatives.fields import CONTEXT_FIELDS
from derivatives.monitor import (
    NOT_POLLED,
    NOT_WIRED,
    ContextField,
    DerivativesContext,
    DerivativesMonitor,
    board_metrics,
)
from gate.metrics import MetricBoard

EPOCH_MS = 1_740_787_200_000
CALM = {"BTC/USDT": 0.0001, "ETH/USDT": -0.0001}
HOT = {"BTC/USDT": 0.0008, "ETH/USDT": 0.0001}


class Settable:
    """A FieldReader whose answer the test sets; counts reads."""

    def __init__(self, name: str, value: Any = None, reason: str | None = None) -> None:
        self.name = name
        self.answer: Cached[Any] = Cached(value, reason, EPOCH_MS if value is not None else None)
        self.reads = 0
        self.error: Exception | None = None

    async def read(self) -> Cached[Any]:
        self.reads += 1
        if self.error is not None:
            raise self.error
        return self.answer


def build(
    funding: Settable,
    *others: ContextField,
    board: MetricBoard | None = None,
    clock: VirtualClock | None = None,
) -> tuple[VirtualClock, EventBus, DerivativesMonitor, list[DerivativesUpdate]]:
    clock = clock or VirtualClock(EPOCH_MS)
    bus = EventBus()
    seen: list[DerivativesUpdate] = []
    bus.subscribe(DerivativesUpdate.topic, seen.append)  # type: ignore[arg-type]
    fields = [ContextField("funding_rates", funding), *others]
    monitor = DerivativesMonitor(clock, bus, fields, board=board, config=DerivativesConfig())
    return clock, bus, monitor, seen


async def poll_times(
    clock: VirtualClock, monitor: DerivativesMonitor, until_secs: float
) -> list[float]:
    """Run the monitor's loop on the virtual clock; the monotonic second of every poll."""
    times: list[float] = []
    task = asyncio.create_task(monitor.run())
    seen = 0
    try:
        while clock.monotonic_secs() <= until_secs:
            await clock.advance(0)
            if monitor.polls > seen:
                seen = monitor.polls
                times.append(clock.monotonic_secs())
            if not await clock.step():
                break
    finally:
        await stop_tasks(task)
    return times


async def test_calm_market_polls_every_five_minutes() -> None:
    funding = Settable("funding", CALM)
    clock, _, monitor, _ = build(funding)
    times = await poll_times(clock, monitor, 1500)
    assert times == [0, 300, 600, 900, 1200, 1500]


async def test_hot_funding_polls_every_minute_and_slows_after_15_quiet_minutes() -> None:
    clock = VirtualClock(EPOCH_MS)

    class HotBetween300And420(Settable):
        async def read(self) -> Cached[Any]:
            hot = 300 <= clock.monotonic_secs() < 420
            return Cached(HOT if hot else CALM, None, EPOCH_MS)

    _, _, monitor, _ = build(HotBetween300And420("funding"), clock=clock)
    times = await poll_times(clock, monitor, 2400)
    # 0 calm; 300 hot -> 1-min polls; last hot poll at 360; quiet from 420; 15 quiet minutes
    # after the last hot poll (360 + 900 = 1260) the cadence is back to 5 minutes
    expected_fast = list(range(300, 1261, 60))
    assert times[: 1 + len(expected_fast)] == [0, *expected_fast]
    assert times[1 + len(expected_fast) :] == [1560, 1860, 2160]


async def test_open_interest_move_over_ten_percent_also_speeds_up() -> None:
    funding = Settable("funding", CALM)
    oi = Settable(
        "oi", {"BTC/USDT": {"value_usd": 112.0, "first_value_usd": 100.0, "change_24h_pct": 12.0}}
    )
    clock, _, monitor, _ = build(funding, ContextField("open_interest", oi))
    times = await poll_times(clock, monitor, 130)
    assert times == [0, 60, 120]


async def test_a_poll_publishes_values_reasons_and_the_signal() -> None:
    funding = Settable("funding", {"BTC/USDT": 0.0005})
    oi = Settable("oi", reason="open interest is not available in the recorded data")
    _, _, monitor, seen = build(funding, ContextField("open_interest", oi))
    reading = await monitor.poll_once()
    assert reading.values["funding_rates"] == {"BTC/USDT": 0.0005}
    assert reading.values["derivatives_signal"] == pytest.approx(-0.7615941559557649 * 0.35)
    assert (
        reading.unavailable["open_interest"]
        == "open interest is not available in the recorded data"
    )
    assert reading.unavailable["basis"] == NOT_WIRED
    assert set(reading.values) | set(reading.unavailable) == set(CONTEXT_FIELDS)
    assert len(seen) == 1 and seen[0].values["signal_inputs_used"] == {"BTC/USDT": ["funding_rate"]}


async def test_no_signal_inputs_gives_a_reason_not_a_zero() -> None:
    funding = Settable("funding", reason="premiumIndex: rate limited (429)")
    _, _, monitor, _ = build(funding)
    reading = await monitor.poll_once()
    assert "derivatives_signal" not in reading.values
    assert "no funding" in reading.unavailable["derivatives_signal"]


async def test_stale_values_are_flagged_in_the_update() -> None:
    funding = Settable("funding")
    funding.answer = Cached(CALM, None, EPOCH_MS - 120_000, stale=True)
    _, _, monitor, seen = build(funding)
    await monitor.poll_once()
    assert seen[0].values["stale_fields"] == {"funding_rates": EPOCH_MS - 120_000}


async def test_the_board_gets_the_gate_metrics() -> None:
    board = MetricBoard()
    funding = Settable("funding", {"BTC/USDT": 0.0003, "ETH/USDT": 0.0001})
    fng = Settable("fng", {"value": 72, "classification": "Greed", "timestamp_ms": EPOCH_MS})
    _, _, monitor, _ = build(funding, ContextField("fear_greed", fng), board=board)
    await monitor.poll_once()
    assert board.get("btc_funding_rate") == 0.0003
    assert board.get("funding_rate") == pytest.approx(0.0002)
    assert board.get("fear_greed") == 72.0
    assert board.get("open_interest_change_pct") is None  # no source: unavailable, not 0


def test_board_metrics_totals_open_interest_over_tickers() -> None:
    metrics = board_metrics(
        {
            "open_interest": {
                "BTC/USDT": {"value_usd": 120.0, "first_value_usd": 100.0},
                "ETH/USDT": {"value_usd": 80.0, "first_value_usd": 100.0},
            },
            "long_short_ratio": {"BTC/USDT": {"ratio": 2.0}, "ETH/USDT": {"ratio": 1.0}},
        }
    )
    assert metrics["open_interest_change_pct"] == pytest.approx(0.0)
    assert metrics["long_short_ratio"] == pytest.approx(1.5)


async def test_a_failing_poll_is_logged_and_retried_with_backoff(
    caplog: pytest.LogCaptureFixture,
) -> None:
    funding = Settable("funding", CALM)
    funding.error = RuntimeError("bug in a source")
    clock, _, monitor, _ = build(funding)
    task = asyncio.create_task(monitor.run())
    with caplog.at_level(logging.ERROR, logger="derivatives.monitor"):
        await clock.advance(0)
        assert funding.reads == 1
        funding.error = None
        while monitor.polls == 0:
            assert await clock.step()
    await stop_tasks(task)
    assert 0 < clock.monotonic_secs() <= DerivativesConfig().loop_backoff_base_secs
    assert any("derivatives poll failed" in r.message for r in caplog.records)


async def test_context_before_and_after_the_first_poll() -> None:
    funding = Settable("funding", CALM)
    _, _, monitor, _ = build(funding)
    context: ContextSource = DerivativesContext(monitor)
    before = await context.read()
    assert dict(before.unavailable) == {name: NOT_POLLED for name in CONTEXT_FIELDS}
    await monitor.poll_once()
    after = await context.read()
    assert after.values["funding_rates"] == CALM
    assert "funding_rates" not in after.unavailable


def test_a_field_outside_the_snapshot_is_refused() -> None:
    with pytest.raises(ValueError, match="not a snapshot context field"):
        ContextField("funding", Settable("x"))
