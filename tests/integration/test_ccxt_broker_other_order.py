"""CcxtBroker against a sim whose answer to a placed order is about another order: another
client order id (one the journal holds), another symbol, the other side. None of it is recorded
against either order or announced as a fill: the placed order is looked up by its own id."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_ccxt_broker_fills import Announced, buy
from test_ccxt_broker_support import ccxt_sim, running_broker

from broker.port import Action
from contract.broker_harness import make_intent

ETH = "ETH/USDT"
ORDER = "/fapi/v1/order"


def filled_as(**fields: str) -> Callable[[str], Callable[[Any], Any]]:
    """The answer rewritten to a FILLED order with ``fields``; ``{first}`` is the first order's
    client order id."""

    def with_first(first: str) -> Callable[[Any], Any]:
        changed = {k: v.format(first=first) for k, v in fields.items()}
        return lambda body: {
            **body,
            "status": "FILLED",
            "executedQty": body["origQty"],
            "avgPrice": body["price"],
            **changed,
        }

    return with_first


@pytest.mark.parametrize(
    "rewrite",
    [
        filled_as(clientOrderId="{first}"),
        filled_as(symbol="BTCUSDT"),
        filled_as(side="SELL"),
    ],
    ids=["other-client-id", "other-symbol", "other-side"],
)
async def test_an_answer_about_another_order_is_looked_up_and_records_nothing(
    tmp_path: Path, rewrite: Callable[[str], Callable[[Any], Any]]
) -> None:
    seen = Announced()
    async with ccxt_sim(tmp_path) as sim, running_broker(sim, seen.bus) as broker:
        (first,) = await broker.execute_decisions([buy(sim)])
        assert first.status == "open"
        sim.server.faults.rewrite_next(rewrite(first.client_order_id), path=ORDER)
        price = sim.server.orders.book.price(ETH)
        intent = make_intent(ETH, Action.BUY, notional_usd=1_000.0, reference_price=price)
        (second,) = await broker.execute_decisions([intent])
        assert second.status == "open" and second.ticker == ETH and second.side == "buy"
        assert second.client_order_id != first.client_order_id
        assert seen.fills == []
        resting = {o.client_order_id: o.ticker for o in await broker.get_open_orders()}
        assert resting == {first.client_order_id: "BTC/USDT", second.client_order_id: ETH}
        assert sim.server.requests[ORDER] == 3  # two POSTs and one lookup
