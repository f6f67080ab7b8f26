"""CcxtBroker against a sim whose answer to a placed BUY limit reports a fill it cannot have had:
more than was ordered, or above the limit price. Neither is journaled or announced: the order is
looked up, and its true state (resting) is what the broker reports."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_ccxt_broker_fills import Announced, buy
from test_ccxt_broker_support import ccxt_sim, running_broker

ORDER = "/fapi/v1/order"


def filled(quantity: Callable[[float], float], price: Callable[[float], float]) -> Any:
    def rewrite(body: Any) -> Any:
        return {
            **body,
            "status": "FILLED",
            "executedQty": repr(quantity(float(body["origQty"]))),
            "avgPrice": repr(price(float(body["price"]))),
        }

    return rewrite


@pytest.mark.parametrize(
    "rewrite",
    [
        filled(lambda ordered: ordered * 1000, lambda limit: limit),
        filled(lambda ordered: ordered + 0.001, lambda limit: limit),
        filled(lambda ordered: ordered, lambda limit: limit * 10),
        filled(lambda ordered: ordered, lambda limit: limit * 1.01),
    ],
    ids=["1000x-ordered", "one-lot-more", "10x-limit", "1pct-above-limit"],
)
async def test_a_fill_beyond_the_order_is_looked_up_not_taken(
    tmp_path: Path, rewrite: Callable[[Any], Any]
) -> None:
    seen = Announced()
    async with ccxt_sim(tmp_path) as sim, running_broker(sim, seen.bus) as broker:
        await broker.reconcile()
        sim.server.faults.rewrite_next(rewrite, path=ORDER)
        (placed,) = await broker.execute_decisions([buy(sim)])
        assert placed.status == "open" and placed.filled_quantity == 0.0
        assert seen.fills == []
        assert [o.client_order_id for o in await broker.get_open_orders()] == [
            placed.client_order_id
        ]
        assert sim.server.requests[ORDER] == 2  # the POST and one lookup


YEAR_MS = 365 * 24 * 3600 * 1000


@pytest.mark.parametrize("ahead_ms", [YEAR_MS, 100 * YEAR_MS, 2**62])
async def test_a_fill_dated_after_the_exchanges_now_is_looked_up_not_taken(
    tmp_path: Path, ahead_ms: int
) -> None:
    seen = Announced()
    async with ccxt_sim(tmp_path) as sim, running_broker(sim, seen.bus) as broker:
        await broker.reconcile()
        future = min(2**63 - 1, sim.clock.now_ms() + ahead_ms)
        rewrite = filled(lambda ordered: ordered, lambda limit: limit)
        sim.server.faults.rewrite_next(
            lambda body: {**rewrite(body), "updateTime": future}, path=ORDER
        )
        (placed,) = await broker.execute_decisions([buy(sim)])
        assert placed.status == "open" and placed.at_ms <= sim.clock.now_ms()
        assert seen.fills == []
        assert sim.server.requests[ORDER] == 2  # the POST and one lookup
