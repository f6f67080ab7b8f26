"""CcxtBroker against the sim's order endpoints when things go wrong: clock skew (-1021), margin
(-2019), duplicate client ids (-4116), a 5xx after the order was accepted, and restarts."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from test_ccxt_broker_support import CcxtSim, ccxt_sim, running_broker

from broker.ids import client_order_id
from broker.order_journal import JournalIntent, OrderJournal
from broker.port import Action, OrderIntent
from contract.broker_harness import make_intent
from market.ccxt_client import CcxtRetryableError

BTC = "BTC/USDT"


def buy_intent(
    sim: CcxtSim, notional_usd: float = 1_000.0, decision_id: str | None = None
) -> OrderIntent:
    price = sim.server.orders.book.price(BTC)
    return make_intent(
        BTC, Action.BUY, notional_usd=notional_usd, reference_price=price, decision_id=decision_id
    )


def open_client_ids(sim: CcxtSim) -> list[str]:
    return [o.client_order_id for o in sim.server.orders.book.open_orders(None)]


async def test_clock_skew_resyncs_time_and_places_once(tmp_path: Path) -> None:
    async with ccxt_sim(tmp_path) as sim, running_broker(sim) as broker:
        await broker.reconcile()
        sim.clock.offset_ms = 30_000  # the exchange's clock jumps: our timestamps are now stale
        (result,) = await broker.execute_decisions([buy_intent(sim)])
        assert result.status == "open", result
        assert sim.server.orders.rejections[-1021] == 1
        assert sim.server.orders.placed_count == 1
        assert open_client_ids(sim) == [result.client_order_id]
        assert await broker.get_cash() < 10_000.0  # later signed reads work too


async def test_insufficient_margin_is_a_journaled_rejection(tmp_path: Path) -> None:
    async with ccxt_sim(tmp_path) as sim, running_broker(sim) as broker:
        intent = buy_intent(sim, notional_usd=50_000.0)
        (result,) = await broker.execute_decisions([intent])
        assert result.status == "rejected"
        assert "insufficient margin" in result.reason and "-2019" in result.reason
        assert sim.server.orders.rejections[-2019] == 1
        assert sim.server.orders.placed_count == 0
        sent = sim.server.requests["/fapi/v1/order"]
        (again,) = await broker.execute_decisions([intent])  # a replay answers from the journal
        assert again == result
        assert sim.server.requests["/fapi/v1/order"] == sent


async def test_duplicate_client_id_is_looked_up_not_placed_twice(tmp_path: Path) -> None:
    async with ccxt_sim(tmp_path) as sim:
        intent = buy_intent(sim)
        async with running_broker(sim) as first:
            (placed,) = await first.execute_decisions([intent])
        sim.journal_path.unlink()  # the journal is lost: only the exchange remembers
        async with running_broker(sim) as second:
            (again,) = await second.execute_decisions([intent])
        assert sim.server.requests["/fapi/v1/order"] >= 3  # two POSTs (one -4116) + lookups
        assert sim.server.orders.rejections[-4116] == 1
        assert again.client_order_id == placed.client_order_id and again.status == "open"
        assert open_client_ids(sim) == [placed.client_order_id]
        assert sim.server.orders.placed_count == 1


@pytest.mark.parametrize("status", [500, 503])
async def test_a_5xx_after_the_order_was_accepted_places_no_duplicate(
    tmp_path: Path, status: int
) -> None:
    async with ccxt_sim(tmp_path) as sim, running_broker(sim) as broker:
        await broker.reconcile()
        sim.server.orders.fail_after_accept(1, status)
        intent = buy_intent(sim)
        (result,) = await broker.execute_decisions([intent])
        assert result.status == "open", result
        assert result.client_order_id == client_order_id(intent.decision_id, BTC, "BUY")
        assert sim.server.orders.placed_count == 1
        assert open_client_ids(sim) == [result.client_order_id]


async def test_a_sell_answered_5xx_after_it_filled_is_not_sold_again(tmp_path: Path) -> None:
    async with ccxt_sim(tmp_path) as sim, running_broker(sim) as broker:
        (bought,) = await broker.execute_decisions([buy_intent(sim)])
        limit = sim.server.orders.book.price(BTC)
        await sim.market.trade(BTC, low=limit * 0.99, high=limit, close=limit * 0.995)
        price = sim.server.orders.book.price(BTC)
        sell = make_intent(BTC, Action.SELL, notional_usd=1_000.0, reference_price=price)
        sim.server.orders.fail_after_accept(1, 500)
        (sold,) = await broker.execute_decisions([sell])
        assert sold.status == "filled" and sold.side == "sell", sold
        assert sold.fee_usd > 0 and sold.average_price == pytest.approx(price * (1 - 0.0005))
        assert sim.server.orders.placed_count == 2  # the buy and ONE sell
        assert await broker.get_positions_detail() == []
        before = sum(sim.server.requests.values())
        (replayed,) = await broker.execute_decisions([sell])
        assert replayed == sold
        assert sum(sim.server.requests.values()) == before
        assert bought.status == "open"


async def test_a_5xx_before_the_order_was_accepted_is_sent_again_after_lookup(
    tmp_path: Path,
) -> None:
    async with ccxt_sim(tmp_path) as sim, running_broker(sim) as broker:
        await broker.reconcile()
        sim.server.faults.fail_next(503, path="/fapi/v1/order")
        (result,) = await broker.execute_decisions([buy_intent(sim)])
        assert result.status == "open", result
        assert sim.server.orders.placed_count == 1
        assert open_client_ids(sim) == [result.client_order_id]


async def test_a_timeout_is_looked_up_then_sent_once_with_the_same_id(tmp_path: Path) -> None:
    async with ccxt_sim(tmp_path) as sim, running_broker(sim, timeout_ms=300) as broker:
        await broker.reconcile()
        # the client gives up waiting; the sim drops the request it never finished reading (as
        # a server does when the peer hangs up), so the lookup finds nothing and the order is
        # sent again with the same client id
        sim.server.faults.delay_next(1.0, path="/fapi/v1/order")
        (result,) = await broker.execute_decisions([buy_intent(sim)])
        assert result.status == "open", result
        assert sim.server.orders.placed_count == 1
        assert open_client_ids(sim) == [result.client_order_id]


async def test_the_journal_is_written_before_the_order_is_sent(tmp_path: Path) -> None:
    async with ccxt_sim(tmp_path) as sim, running_broker(sim, max_sends=1) as broker:
        await broker.reconcile()
        sim.server.faults.fail_next(503, count=10)  # order and lookups all fail
        intent = buy_intent(sim)
        cid = client_order_id(intent.decision_id, BTC, "BUY")
        with pytest.raises(CcxtRetryableError):  # the lookup's retries run out
            await broker.execute_decisions([intent])
        lines = [orjson.loads(line) for line in sim.journal_path.read_bytes().splitlines()]
        assert [(x["kind"], x["client_order_id"]) for x in lines] == [("intent", cid)]
        assert sim.server.orders.placed_count == 0


async def test_restart_reconciles_fills_positions_and_unsent_orders(tmp_path: Path) -> None:
    async with ccxt_sim(tmp_path) as sim:
        async with running_broker(sim) as before:
            (placed,) = await before.execute_decisions([buy_intent(sim)])
        # while the daemon is down: the order fills, and a crash had left an unsent intent
        limit = sim.server.orders.book.price(BTC)
        await sim.market.trade(BTC, low=limit * 0.99, high=limit, close=limit * 0.995)
        journal = OrderJournal(sim.journal_path)
        journal.load()
        journal.record_intent(
            JournalIntent(
                client_order_id="vgb-ETHUSDT-00000000000000000000",
                decision_id="crashed",
                ticker="ETH/USDT",
                side="buy",
                requested_notional_usd=500.0,
                at_ms=1,
            )
        )
        async with running_broker(sim) as after:
            report = await after.reconcile()
            assert [r.client_order_id for r in report.resolved] == [placed.client_order_id]
            assert report.resolved[0].status == "filled"
            assert report.never_sent == ("vgb-ETHUSDT-00000000000000000000",)
            assert report.open_client_order_ids == () and report.foreign_open_orders == ()
            (position,) = report.positions
            assert position.ticker == BTC
            assert position.quantity == pytest.approx(report.resolved[0].filled_quantity)
            assert position.opened_at_ms == report.resolved[0].at_ms
            requests = sum(sim.server.requests.values())
            found = await after.lookup(placed.client_order_id)
            assert found == report.resolved[0]
            assert sum(sim.server.requests.values()) == requests  # final: from the journal


async def test_reconcile_reports_open_orders_it_did_not_place(tmp_path: Path) -> None:
    async with ccxt_sim(tmp_path) as sim:
        async with running_broker(sim) as someone_else:
            (foreign,) = await someone_else.execute_decisions([buy_intent(sim)])
        sim.journal_path.unlink()
        async with running_broker(sim) as broker:
            report = await broker.reconcile()
        assert report.foreign_open_orders == (foreign.client_order_id,)
        assert open_client_ids(sim) == [foreign.client_order_id]  # left alone
