"""The broker's side of a snapshot: positions (with their peak price and holding time) and resting
orders, in the snapshot's own types and order."""

from __future__ import annotations

from dataclasses import dataclass

from agent.snapshot import PendingOrderSnapshot, PositionSnapshot
from broker.port import OpenOrder, PositionDetail


@dataclass(frozen=True)
class Portfolio:
    """The broker's side of a snapshot: its positions, resting orders, value and cash."""

    positions: list[PositionSnapshot]
    pending_orders: list[PendingOrderSnapshot]
    value: float | None
    cash: float | None


def pending_order(order: OpenOrder) -> PendingOrderSnapshot:
    return PendingOrderSnapshot(
        ticker=order.ticker,
        side=order.side,
        notional_usd=order.notional_usd,
        limit_price=order.limit_price,
        placed_at_ms=order.placed_at_ms,
        expires_at_ms=order.expires_at_ms,
    )


def pending_order_key(order: PendingOrderSnapshot) -> tuple[str, int, str, float, float]:
    return (
        order.ticker,
        order.placed_at_ms,
        order.side,
        order.limit_price or 0.0,
        order.notional_usd,
    )


def position_snapshot(detail: PositionDetail, peak: float | None, at_ms: int) -> PositionSnapshot:
    mark = detail.mark_price
    pnl_pct = (mark / detail.entry_price - 1.0) * 100.0 if mark is not None else None
    known_peak = max(p for p in (peak, mark, detail.entry_price) if p is not None)
    return PositionSnapshot(
        ticker=detail.ticker,
        quantity=detail.quantity,
        entry_price=detail.entry_price,
        mark_price=mark,
        pnl_pct=pnl_pct,
        peak_price=known_peak,
        opened_at_ms=detail.opened_at_ms,
        holding_secs=max(0.0, (at_ms - detail.opened_at_ms) / 1000.0),
    )


__all__ = ["Portfolio", "pending_order", "pending_order_key", "position_snapshot"]
