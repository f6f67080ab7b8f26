"""The notifier's watcher: which changes between two looks at the daemon become notifications,
and the day's summary at UTC midnight of the daemon's clock."""

from __future__ import annotations

from dataclasses import replace

from api.notify.config import NotifyConfig
from api.notify.watch import NotifyService, Sample, changes
from core.clock import DAY_MS, VirtualClock
from core.events import OrderFilled, PositionExit

T0 = 1_740_787_200_000  # 2025-03-01T00:00:00Z
BASE = Sample(
    at_ms=T0, trading="active", trading_reason=None, breaker="closed",
    loop_restarts={"market": 0}, loop_errors={"market": None}, journal_failed_writes=0,
    market_silent_secs=1.0, equity_usd=10_000.0,
)  # fmt: skip


def events(prev: Sample, cur: Sample) -> list[tuple[str, str]]:
    return [(n.event, n.text) for n in changes(prev, cur, market_stale_secs=300)]


def test_nothing_changed_is_no_notification() -> None:
    assert events(BASE, replace(BASE, at_ms=T0 + 30_000, equity_usd=9_000.0)) == []


def test_trading_and_breaker_transitions() -> None:
    halted = replace(BASE, trading="halted", trading_reason="operator test")
    assert events(BASE, halted) == [("trading_halted", "trading HALTED: operator test")]
    assert [e for e, _ in events(halted, BASE)] == ["trading_resumed"]
    opened = replace(BASE, breaker="open")
    assert [e for e, _ in events(BASE, opened)] == ["breaker_opened"]
    half = replace(BASE, breaker="half_open")
    assert events(opened, half) == []  # a trial call is not news; its outcome is
    assert [e for e, _ in events(half, BASE)] == ["breaker_closed"]


def test_health_failures_and_recovery() -> None:
    failed = replace(
        BASE,
        loop_restarts={"market": 1},
        loop_errors={"market": "ConnectionResetError"},
        journal_failed_writes=2,
        market_silent_secs=400.0,
    )
    assert events(BASE, failed) == [
        ("health", "loop market restarted (1 so far): ConnectionResetError"),
        ("health", "2 journal writes failed"),
        ("health", "no market data for 400 s"),
    ]
    assert events(failed, replace(failed, market_silent_secs=500.0)) == []  # said once
    assert events(failed, replace(failed, market_silent_secs=2.0)) == [
        ("health", "market data is flowing again")
    ]


async def test_the_day_summary_counts_the_day_and_resets() -> None:
    async def sample() -> Sample:
        return BASE

    service = NotifyService(NotifyConfig(), VirtualClock(T0), sample, 300)
    service.start_day(BASE)
    service.on_event(OrderFilled(at_ms=T0, client_order_id="c", ticker="ETH/USDT", side="buy",
                                 quantity=1.0, price=2_000.0, fee=0.4))  # fmt: skip
    service.on_event(PositionExit(at_ms=T0, ticker="ETH/USDT", reason="stop_loss", pnl_pct=-1.0,
                                  holding_secs=60, regime="bull"))  # fmt: skip
    service.on_decision({"type": "decision"})
    service.on_decision({"type": "review"})
    late = replace(BASE, at_ms=T0 + DAY_MS - 1, equity_usd=10_100.0)
    assert service.step(BASE, late) == []
    next_day = replace(BASE, at_ms=T0 + DAY_MS + 5_000, equity_usd=10_050.0)
    (day,) = service.step(late, next_day)
    assert day.event == "daily_summary"
    assert (
        day.text
        == "2025-03-01: equity 10,100.00 (+1.00 % on the day); 1 decisions, 1 fills, 1 exits"
    )
    assert day.fields["change_pct"] == 1.0
    assert service.step(next_day, replace(next_day, at_ms=next_day.at_ms + 30_000)) == []
