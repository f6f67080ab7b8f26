"""CcxtBroker.get_open_orders against the sim: what it costs in requests, and what the journal
learns from it (the contract suite checks the orders it reports)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_ccxt_broker_faults import BTC, buy_intent
from test_ccxt_broker_fills import SIGNALS, Announced, buy, trade_through
from test_ccxt_broker_support import CcxtSim, ccxt_sim, running_broker

from broker.order_journal import OrderJournal

OPEN_ORDERS = "/fapi/v1/openOrders"
ORDER = "/fapi/v1/order"
ORDER_GONE = {"code": -2013, "msg": "Order does not exist."}


def requests(sim: CcxtSim) -> int:
    return sum(sim.server.requests.values())


def journaled_status(sim: CcxtSim, client_order_id: str) -> str | None:
    journal = OrderJournal(sim.journal_path)
    journal.load()
    entry = journal.get(client_order_id)
    assert entry is not None
    return None if entry.final is None else entry.final.status


async def test_nothing_pending_in_the_journal_asks_the_exchange_nothing(tmp_path: Path) -> None:
    async with ccxt_sim(tmp_path) as sim, running_broker(sim) as broker:
        await broker.reconcile()
        before = requests(sim)
        assert await broker.get_open_orders() == []
        assert requests(sim) == before


async def test_a_fill_nobody_saw_is_journaled_and_then_costs_nothing(tmp_path: Path) -> None:
    async with ccxt_sim(tmp_path) as sim, running_broker(sim) as broker:
        (placed,) = await broker.execute_decisions([buy_intent(sim)])
        asked = sim.server.requests[OPEN_ORDERS]
        (order,) = await broker.get_open_orders()
        assert order.client_order_id == placed.client_order_id
        assert sim.server.requests[OPEN_ORDERS] == asked + 1  # one symbol, one request

        limit = sim.server.orders.book.price(BTC)
        await sim.market.trade(BTC, low=limit * 0.99, high=limit, close=limit * 0.995)
        assert await broker.get_open_orders() == []
        assert journaled_status(sim, placed.client_order_id) == "filled"

        before = requests(sim)
        assert await broker.get_open_orders() == []
        assert requests(sim) == before  # the journal knows it is final


async def test_a_resting_order_survives_a_restart_with_its_placement_time(
    tmp_path: Path,
) -> None:
    async with ccxt_sim(tmp_path) as sim:
        async with running_broker(sim) as before:
            (placed,) = await before.execute_decisions([buy_intent(sim, notional_usd=800.0)])
            (first,) = await before.get_open_orders()
        async with running_broker(sim) as after:
            (again,) = await after.get_open_orders()
        assert again == first
        assert again.client_order_id == placed.client_order_id
        assert again.limit_price is not None
        assert again.notional_usd == pytest.approx(again.quantity * again.limit_price)
        assert 700.0 < again.notional_usd <= 800.0  # the quantity is rounded down to the lot
        journal = OrderJournal(sim.journal_path)
        journal.load()
        entry = journal.get(placed.client_order_id)
        assert entry is not None and again.placed_at_ms == entry.intent.at_ms
        assert again.expires_at_ms is None  # GTC


async def test_orders_a_person_placed_are_not_vigils(tmp_path: Path) -> None:
    async with ccxt_sim(tmp_path) as sim:
        async with running_broker(sim) as someone_else:
            await someone_else.execute_decisions([buy_intent(sim)])
        sim.journal_path.unlink()
        async with running_broker(sim) as broker:
            report = await broker.reconcile()
            assert len(report.foreign_open_orders) == 1
            assert await broker.get_open_orders() == []


async def test_a_resting_order_a_lookup_misses_on_start_is_kept_resting(tmp_path: Path) -> None:
    """A lookup answering "does not exist" (-2013) for an order the same start's open orders list
    made reconcile journal it as never sent: no longer resting for the risk caps, and its fill
    never announced."""
    seen = Announced()
    async with ccxt_sim(tmp_path) as sim:
        async with running_broker(sim) as before:
            (placed,) = await before.execute_decisions([buy(sim)])
        async with running_broker(sim, seen.bus) as after:
            sim.server.faults.rewrite_next(lambda body: ORDER_GONE, path=ORDER)
            report = await after.reconcile()
            assert report.never_sent == () and report.resolved == ()
            assert report.open_client_order_ids == (placed.client_order_id,)
            (resting,) = await after.get_open_orders()
            assert resting.client_order_id == placed.client_order_id
            await trade_through(sim)
            (position,) = await after.get_positions_detail()
            assert position.signals == SIGNALS
            (fill,) = seen.fills
            assert fill.client_order_id == placed.client_order_id
        assert journaled_status(sim, placed.client_order_id) == "filled"
