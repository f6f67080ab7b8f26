"""CcxtBroker announces its own fills on the bus, against the sim's order API: a limit BUY that
fills later, a fill whose fee cannot be read, and the fills announced again on a restart."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_ccxt_broker_support import CcxtSim, ccxt_sim, running_broker

from broker.port import Action, OrderIntent
from contract.broker_harness import make_intent
from core.bus import EventBus
from core.events import Event, OrderFilled, PositionOpened, Topic
from runner.subscriptions import trades_row_writer
from state.journal import CsvJournal, read_csv_rows
from state.records import TRADE_COLUMNS

BTC = "BTC/USDT"
SIGNALS = {"rsi": 0.4, "momentum": -0.1}


class Announced:
    """Inline bus subscribers collecting what the broker announced."""

    def __init__(self) -> None:
        self.bus = EventBus()
        self.fills: list[OrderFilled] = []
        self.opened: list[PositionOpened] = []
        self.bus.subscribe(Topic.ORDER_FILLED, self._on, name="test_fills")
        self.bus.subscribe(Topic.POSITION_OPENED, self._on, name="test_opened")

    def _on(self, event: Event) -> None:
        if isinstance(event, OrderFilled):
            self.fills.append(event)
        elif isinstance(event, PositionOpened):
            self.opened.append(event)


def buy(sim: CcxtSim) -> OrderIntent:
    intent = make_intent(
        BTC,
        Action.BUY,
        notional_usd=1_000.0,
        reference_price=sim.server.orders.book.price(BTC),
        signal_weights=SIGNALS,
    )
    return intent.model_copy(update={"regime": "high_volatility"})


async def trade_through(sim: CcxtSim) -> None:
    limit = sim.server.orders.book.price(BTC)
    await sim.market.trade(BTC, low=limit * 0.99, high=limit, close=limit * 0.995)


async def test_a_limit_buy_that_fills_later_is_announced_once_with_its_entry(
    tmp_path: Path,
) -> None:
    seen = Announced()
    async with ccxt_sim(tmp_path) as sim, running_broker(sim, seen.bus) as broker:
        (placed,) = await broker.execute_decisions([buy(sim)])
        assert placed.status == "open" and seen.fills == []
        await trade_through(sim)
        assert await broker.get_open_orders() == []  # notices the fill
        await broker.get_positions_detail()
        await broker.get_open_orders()
        (fill,) = seen.fills
        assert fill.client_order_id == placed.client_order_id and fill.side == "buy"
        assert fill.fee > 0 and not fill.fee_estimated and not fill.recovered
        (opened,) = seen.opened
        assert opened.signals == SIGNALS and opened.regime == "high_volatility"
        (position,) = await broker.get_positions_detail()
        assert position.signals == SIGNALS and position.regime == "high_volatility"
        assert len(seen.fills) == 1


async def test_a_fill_seen_first_by_the_position_read_is_announced_before_it(
    tmp_path: Path,
) -> None:
    seen = Announced()
    async with ccxt_sim(tmp_path) as sim, running_broker(sim, seen.bus) as broker:
        (placed,) = await broker.execute_decisions([buy(sim)])
        await trade_through(sim)
        (position,) = await broker.get_positions_detail()
        assert [f.client_order_id for f in seen.fills] == [placed.client_order_id]
        assert [o.ticker for o in seen.opened] == [position.ticker]


async def test_a_fill_whose_fee_cannot_be_read_is_announced_with_an_estimated_fee(
    tmp_path: Path,
) -> None:
    seen = Announced()
    async with ccxt_sim(tmp_path) as sim, running_broker(sim, seen.bus) as broker:
        (placed,) = await broker.execute_decisions([buy(sim)])
        await trade_through(sim)
        sim.server.faults.fail_next(503, count=50, path="/fapi/v1/userTrades")
        assert await broker.get_open_orders() == []  # no exception: the fill is not held back
        price = sim.server.orders.book.price(BTC)
        sell = make_intent(BTC, Action.SELL, notional_usd=1_000.0, reference_price=price)
        (sold,) = await broker.execute_decisions([sell])  # the decision gets its answer
        assert sold.status == "filled" and sold.fee_estimated
        bought, sale = seen.fills
        assert bought.client_order_id == placed.client_order_id and bought.fee_estimated
        assert bought.fee == pytest.approx(bought.quantity * bought.price * 0.02 / 100)
        assert sale.fee_estimated and sale.fee == pytest.approx(
            sale.quantity * sale.price * 0.05 / 100
        )
        assert [e.final.fee_estimated for e in broker._journal.entries() if e.final] == [
            True,
            True,
        ]


async def test_recorded_fills_are_announced_again_on_start(tmp_path: Path) -> None:
    async with ccxt_sim(tmp_path) as sim:
        async with running_broker(sim) as before:  # no bus: a kill before any row was written
            (placed,) = await before.execute_decisions([buy(sim)])
            await trade_through(sim)
            await before.get_open_orders()
        seen = Announced()
        async with running_broker(sim, seen.bus) as after:
            await after.reconcile()
            assert after.announce_recorded_fills() == 1
        assert [(f.client_order_id, f.recovered) for f in seen.fills] == [
            (placed.client_order_id, True)
        ]
        assert seen.opened == []  # positions are adopted by the tracker, with their entry


async def test_a_limit_buy_that_fills_later_gets_its_trades_row_once(tmp_path: Path) -> None:
    seen = Announced()
    path = tmp_path / "trades.csv"
    with CsvJournal(path, TRADE_COLUMNS, fsync=False) as trades:
        seen.bus.subscribe(Topic.ORDER_FILLED, trades_row_writer(trades), name="trades")
        async with ccxt_sim(tmp_path) as sim, running_broker(sim, seen.bus) as broker:
            (placed,) = await broker.execute_decisions([buy(sim)])
            await trade_through(sim)
            await broker.get_open_orders()
            broker.announce_recorded_fills()  # as a restart does
    (row,) = read_csv_rows(path)
    assert row["client_order_id"] == placed.client_order_id and row["side"] == "buy"
    assert float(row["fee_usd"]) > 0 and row["fee_estimated"] == "false"
