"""CcxtBroker reading a fill's fee from a sim whose trades answer is hostile: every trade twice,
a trade of another order, two different trades under one id, no trades for a filled order. A
trade is counted once, and a fee the answer cannot tell is the configured rate's estimate."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_ccxt_broker_fills import buy, trade_through
from test_ccxt_broker_support import ccxt_sim, running_broker

from broker.port import Action
from contract.broker_harness import make_intent

BTC = "BTC/USDT"
FILLS = "/fapi/v1/userTrades"
TAKER_PCT = 0.05


def other_order(body: Any) -> Any:
    (trade,) = body
    return [trade, {**trade, "id": trade["id"] + 1, "orderId": trade["orderId"] + 1}]


def one_id_twice(body: Any) -> Any:
    (trade,) = body
    return [trade, {**trade, "commission": repr(float(trade["commission"]) * 3)}]


@pytest.mark.parametrize(
    ("rewrite", "estimated"),
    [
        (lambda body: body + body, False),
        (other_order, True),
        (one_id_twice, True),
        (lambda body: [], True),
    ],
    ids=["every-trade-twice", "another-orders-trade", "one-id-two-trades", "no-trades"],
)
async def test_a_hostile_trades_answer_never_counts_a_fee_twice(
    tmp_path: Path, rewrite: Callable[[Any], Any], estimated: bool
) -> None:
    async with ccxt_sim(tmp_path) as sim, running_broker(sim) as broker:
        await broker.execute_decisions([buy(sim)])
        await trade_through(sim)
        assert len(await broker.get_positions_detail()) == 1
        sim.server.faults.rewrite_next(rewrite, path=FILLS)
        price = sim.server.orders.book.price(BTC)
        sell = make_intent(BTC, Action.SELL, notional_usd=1_000.0, reference_price=price)
        (sold,) = await broker.execute_decisions([sell])
        assert sold.status == "filled" and sold.fee_estimated is estimated
        notional = sold.filled_quantity * (sold.average_price or 0.0)
        assert sold.fee_usd == pytest.approx(notional * TAKER_PCT / 100)
