"""``agent.risk.risk_context``: the snapshot's resting BUY orders reach the risk caps."""

from __future__ import annotations

from typing import Literal

import pytest

from agent.risk import risk_context
from agent.snapshot import MarketSnapshot, PendingOrderSnapshot, PositionSnapshot

TICKERS = ("BTC/USDT", "ETH/USDT", "SOL/USDT")


def _pending(
    ticker: str, side: Literal["buy", "sell"], notional_usd: float, at_ms: int
) -> PendingOrderSnapshot:
    return PendingOrderSnapshot(
        ticker=ticker,
        side=side,
        notional_usd=notional_usd,
        limit_price=100.0,
        placed_at_ms=at_ms,
        expires_at_ms=at_ms + 900_000,
    )


def _snapshot(pending: list[PendingOrderSnapshot]) -> MarketSnapshot:
    return MarketSnapshot(
        at_ms=1_000_000,
        tickers={},
        btc_price=None,
        btc_change_1h_pct=None,
        btc_change_24h_pct=None,
        regime=None,
        exposure_scale=1.0,
        open_positions=[
            PositionSnapshot(
                ticker="ETH/USDT",
                quantity=0.5,
                entry_price=2_000.0,
                mark_price=2_100.0,
                pnl_pct=5.0,
                peak_price=2_100.0,
                opened_at_ms=0,
                holding_secs=1_000.0,
            )
        ],
        pending_orders=pending,
        portfolio_value=10_000.0,
        cash=7_000.0,
        gate_wake_reasons=[],
    )


def test_resting_buys_are_summed_per_ticker_apart_from_positions() -> None:
    ctx = risk_context(
        _snapshot(
            [
                _pending("ETH/USDT", "buy", 600.0, 1),
                _pending("ETH/USDT", "buy", 400.0, 2),
                _pending("SOL/USDT", "buy", 250.0, 3),
                _pending("SOL/USDT", "sell", 900.0, 4),  # a sell adds no exposure
            ]
        ),
        TICKERS,
    )
    assert ctx.resting_buy_notional_usd == pytest.approx({"ETH/USDT": 1_000.0, "SOL/USDT": 250.0})
    assert ctx.position_notional_usd == pytest.approx({"ETH/USDT": 1_050.0})
    assert (ctx.portfolio_value_usd, ctx.cash_usd) == (10_000.0, 7_000.0)


def test_no_resting_orders_no_resting_exposure() -> None:
    assert risk_context(_snapshot([]), TICKERS).resting_buy_notional_usd == {}
