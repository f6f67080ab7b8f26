"""The broker's resting BUY limits in the snapshot: sorted and deterministic, an empty list when
there are none, and unreadable open orders make the whole portfolio unavailable."""

from __future__ import annotations

import orjson
from snapshot_support import START_MS, FakeBroker, make_builder, seeded  # noqa: F401

from broker.port import OpenOrder
from market.aggregator import MultiTFAggregator
from market.features import FeatureTracker


def _resting(cid: str, ticker: str, placed_at_ms: int, limit: float, quantity: float) -> OpenOrder:
    return OpenOrder(
        client_order_id=cid,
        ticker=ticker,
        side="buy",
        quantity=quantity,
        limit_price=limit,
        notional_usd=quantity * limit,
        placed_at_ms=placed_at_ms,
        expires_at_ms=placed_at_ms + 900_000,
    )


async def test_resting_orders_are_in_the_snapshot_sorted_and_deterministic(
    seeded: tuple[MultiTFAggregator, FeatureTracker],  # noqa: F811
) -> None:
    orders = [
        _resting("c3", "SOL/USDT", START_MS - 60_000, 146.5, 3.0),
        _resting("c1", "ETH/USDT", START_MS - 30_000, 2_210.123456789, 0.45),
        _resting("c2", "ETH/USDT", START_MS - 90_000, 2_200.0, 0.1),
    ]
    first = await make_builder(*seeded, broker=FakeBroker(orders=orders)).build([])
    again = await make_builder(*seeded, broker=FakeBroker(orders=orders[::-1])).build([])
    assert [(o.ticker, o.placed_at_ms) for o in first.pending_orders] == [
        ("ETH/USDT", START_MS - 90_000),
        ("ETH/USDT", START_MS - 30_000),
        ("SOL/USDT", START_MS - 60_000),
    ]
    assert first.to_json_bytes() == again.to_json_bytes()  # broker order does not matter
    eth = orjson.loads(first.to_json_bytes())["pending_orders"][1]
    assert eth == {
        "ticker": "ETH/USDT",
        "side": "buy",
        "notional_usd": round(0.45 * 2_210.123456789, 8),
        "limit_price": round(2_210.123456789, 8),
        "placed_at_ms": START_MS - 30_000,
        "expires_at_ms": START_MS - 30_000 + 900_000,
    }
    assert "pending_orders" not in first.unavailable


async def test_no_resting_orders_is_an_empty_list_not_a_gap(
    seeded: tuple[MultiTFAggregator, FeatureTracker],  # noqa: F811
) -> None:
    snap = await make_builder(*seeded).build([])
    assert snap.pending_orders == [] and "pending_orders" not in snap.unavailable
    assert orjson.loads(snap.to_json_bytes())["pending_orders"] == []


async def test_unreadable_open_orders_make_the_whole_portfolio_unavailable(
    seeded: tuple[MultiTFAggregator, FeatureTracker],  # noqa: F811
) -> None:
    """Positions without the orders about to add to them would let the caps buy twice."""
    snap = await make_builder(*seeded, broker=FakeBroker(orders_fail=True)).build([])
    assert snap.portfolio_value is None and snap.cash is None
    assert snap.open_positions == [] and snap.pending_orders == []
    for name in ("open_positions", "pending_orders", "portfolio_value", "cash"):
        assert "openOrders timed out" in snap.unavailable[name]
