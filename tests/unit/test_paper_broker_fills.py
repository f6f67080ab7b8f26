"""PaperBroker fill rules: limits fill only through the price, market sells pay slippage and the
taker fee, quantities round down to the step, cash is reserved, limits expire, sells can be partial."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from broker.ids import client_order_id
from broker.orders import BookUpdate
from broker.paper import PaperBroker
from broker.port import Action, OrderResult
from contract.broker_harness import make_intent
from core.clock import VirtualClock

EPOCH_MS = 1_740_787_200_000
BTC = "BTC/USDT"
ETH = "ETH/USDT"


def make_broker(**terms: Any) -> tuple[PaperBroker, VirtualClock]:
    clock = VirtualClock(EPOCH_MS)
    return PaperBroker(clock, **terms), clock


async def later(
    broker: PaperBroker, clock: VirtualClock, ticker: str, price: float, **kw: Any
) -> BookUpdate:
    await clock.advance(1.0)
    return broker.on_market_price(ticker, price, at_ms=clock.now_ms(), **kw)


async def buy(
    broker: PaperBroker, ticker: str, notional: float, limit: float, **kw: Any
) -> OrderResult:
    (result,) = await broker.execute_decisions(
        [make_intent(ticker, Action.BUY, notional_usd=notional, reference_price=limit, **kw)]
    )
    return result


async def sell(broker: PaperBroker, ticker: str, notional: float, price: float) -> OrderResult:
    (result,) = await broker.execute_decisions(
        [make_intent(ticker, Action.SELL, notional_usd=notional, reference_price=price)]
    )
    return result


async def test_a_limit_fills_at_its_price_even_when_the_market_gaps_far_below() -> None:
    broker, clock = make_broker()
    placed = await buy(broker, BTC, 1000.0, 100.0)
    update = await later(broker, clock, BTC, 80.0)
    (fill,) = update.fills
    assert fill.order.client_order_id == placed.client_order_id
    assert fill.order.average_price == Decimal("100.0")  # a resting limit never fills better
    assert fill.order.fee_usd == Decimal("0.2")  # 1000 USD x 0.02 % maker
    assert broker.ledger.cash_usd == Decimal("8999.8")


async def test_the_low_counts_even_when_the_price_is_back_above_the_limit() -> None:
    broker, clock = make_broker()
    placed = await buy(broker, BTC, 1000.0, 100.0)
    await later(broker, clock, BTC, 100.5, low=99.99, high=100.6)
    found = await broker.lookup(placed.client_order_id)
    assert found is not None and found.status == "filled"


async def test_a_touch_of_the_limit_does_not_fill() -> None:
    broker, clock = make_broker()
    placed = await buy(broker, BTC, 1000.0, 100.0)
    await later(broker, clock, BTC, 100.0, low=100.0, high=101.0)
    await later(broker, clock, BTC, 100.0)
    assert broker.ledger.positions == {}
    assert [o.client_order_id for o in broker.open_orders()] == [placed.client_order_id]


async def test_trading_reported_at_or_before_the_placement_does_not_fill() -> None:
    broker, clock = make_broker()
    placed_at = clock.now_ms()
    await buy(broker, BTC, 1000.0, 100.0)
    broker.on_market_price(BTC, 90.0, at_ms=placed_at)  # same instant: may predate the order
    broker.on_market_price(BTC, 90.0, at_ms=placed_at - 500)  # a late tick
    assert broker.ledger.positions == {} and len(broker.open_orders()) == 1
    broker.on_market_price(BTC, 99.0, at_ms=placed_at + 1)
    assert broker.open_orders() == [] and BTC in broker.ledger.positions


async def test_another_tickers_market_does_not_fill_an_order() -> None:
    broker, clock = make_broker()
    await buy(broker, BTC, 1000.0, 100.0)
    await later(broker, clock, ETH, 1.0)
    assert len(broker.open_orders()) == 1


async def test_quantity_rounds_down_to_the_tickers_step() -> None:
    broker, _ = make_broker(quantity_step="0.0001", quantity_steps={BTC: "0.001"})
    btc = await buy(broker, BTC, 1000.0, 84_321.5)
    eth = await buy(broker, ETH, 1000.0, 2217.37)
    orders = {o.ticker: o for o in broker.open_orders()}
    assert orders[BTC].quantity == Decimal("0.011")  # 0.011859... rounded down
    assert orders[ETH].quantity == Decimal("0.4509")  # 0.450985... rounded down
    # reserved: cost at the limit plus the maker fee, to the 1e-8 USD
    assert orders[BTC].reserved_usd == Decimal("927.5365") + Decimal("0.18550730")
    assert btc.requested_notional_usd == 1000.0 and eth.status == "open"
    assert orders[ETH].reserved_usd == Decimal("999.812133") + Decimal("0.19996243")
    assert broker.ledger.cash_usd == Decimal("8072.26589727")


async def test_an_order_smaller_than_one_step_is_rejected() -> None:
    broker, _ = make_broker(quantity_steps={BTC: "0.001"})
    result = await buy(broker, BTC, 50.0, 84_321.5)
    assert result.status == "rejected" and "rounds to zero" in result.reason
    assert broker.ledger.reserved_usd == 0


async def test_two_orders_cannot_spend_the_same_cash() -> None:
    broker, _ = make_broker(starting_cash_usd=1000)
    first = await buy(broker, BTC, 900.0, 100.0)
    second = await buy(broker, ETH, 900.0, 100.0)
    assert (first.status, second.status) == ("open", "rejected")
    assert "insufficient cash" in second.reason
    assert broker.ledger.reserved_usd == Decimal("900.18")


async def test_an_unfilled_limit_expires_after_its_time_to_live_and_releases_cash() -> None:
    broker, clock = make_broker(limit_ttl_secs=900)
    placed = await buy(broker, BTC, 1000.0, 100.0)
    await clock.advance(899)
    assert broker.expire_due_orders() == ()
    await clock.advance(1)
    (expired,) = broker.expire_due_orders()
    assert expired.client_order_id == placed.client_order_id
    assert expired.status == "cancelled" and "expired" in expired.reason
    assert await broker.get_cash() == 10_000.0
    await later(broker, clock, BTC, 90.0)  # too late: nothing fills
    assert broker.ledger.positions == {}


async def test_market_time_past_the_expiry_expires_before_it_can_fill() -> None:
    broker, clock = make_broker(limit_ttl_secs=60)
    placed = await buy(broker, BTC, 1000.0, 100.0)
    update = broker.on_market_price(BTC, 90.0, at_ms=clock.now_ms() + 60_000)
    assert update.fills == () and [o.client_order_id for o in update.expired] == [
        placed.client_order_id
    ]


async def test_reads_expire_due_orders_too() -> None:
    broker, clock = make_broker(limit_ttl_secs=60)
    placed = await buy(broker, BTC, 1000.0, 100.0)
    await clock.advance(61)
    found = await broker.lookup(placed.client_order_id)
    assert found is not None and found.status == "cancelled"
    assert broker.ledger.reserved_usd == 0


async def test_a_market_sell_pays_slippage_and_the_taker_fee_exactly() -> None:
    broker, clock = make_broker(slippage_pct="0.1", taker_fee_pct="0.04", maker_fee_pct="0.01")
    await buy(broker, BTC, 1000.0, 100.0)
    await later(broker, clock, BTC, 99.0)
    await later(broker, clock, BTC, 110.0)
    result = await sell(broker, BTC, 1100.0, 110.0)
    assert result.status == "filled" and result.filled_quantity == 10.0
    order = broker.order(result.client_order_id)
    assert order is not None
    assert order.average_price == Decimal("109.89")  # 110 x (1 - 0.1 %)
    assert order.fee_usd == Decimal("0.43956")  # 1098.9 x 0.04 %
    assert order.realised_pnl_usd == Decimal("98.9")
    assert broker.ledger.fees_paid_usd == Decimal("0.1") + Decimal("0.43956")
    assert broker.ledger.cash_usd == Decimal(10_000) - Decimal("1000.1") + Decimal(
        "1098.9"
    ) - Decimal("0.43956")
    assert broker.ledger.positions == {}


async def test_a_sell_without_a_position_is_rejected() -> None:
    broker, _ = make_broker()
    result = await sell(broker, BTC, 100.0, 100.0)
    assert (result.status, result.reason) == ("rejected", "no position")


async def test_a_sell_needs_a_recent_market_price() -> None:
    broker, clock = make_broker(max_price_age_secs=300)
    await buy(broker, BTC, 1000.0, 100.0)
    await later(broker, clock, BTC, 99.0)
    await clock.advance(301)
    result = await sell(broker, BTC, 990.0, 99.0)
    assert result.status == "rejected" and "no market price" in result.reason
    assert BTC in broker.ledger.positions


async def test_a_sell_for_less_than_the_position_sells_that_share() -> None:
    broker, clock = make_broker()
    await buy(broker, BTC, 1000.0, 100.0)
    await later(broker, clock, BTC, 99.0)
    result = await sell(broker, BTC, 396.0, 99.0)  # 4 of the 10 held
    assert result.status == "filled" and result.filled_quantity == 4.0
    position = broker.ledger.positions[BTC]
    assert position.quantity == Decimal(6) and position.cost_basis_usd == Decimal(600)
    order = broker.order(result.client_order_id)
    assert order is not None and order.closed_cost_basis_usd == Decimal(400)
    assert "partial" in order.reason


@pytest.mark.parametrize("notional", [940.5, 990.0, 5_000.0])
async def test_a_sell_for_nearly_all_or_more_closes_everything(notional: float) -> None:
    broker, clock = make_broker()
    await buy(broker, BTC, 1000.0, 100.0)
    await later(broker, clock, BTC, 99.0)
    result = await sell(broker, BTC, notional, 99.0)  # 95 % of 990 is 940.5
    assert result.status == "filled" and result.filled_quantity == 10.0
    assert broker.ledger.positions == {}


async def test_a_second_buy_tops_up_the_position_at_the_average_entry() -> None:
    broker, clock = make_broker()
    await buy(broker, BTC, 1000.0, 100.0)
    await later(broker, clock, BTC, 99.0)
    opened_at = broker.ledger.positions[BTC].opened_at_ms
    await later(broker, clock, BTC, 81.0)  # the market fell: the next limit is near it
    await buy(broker, BTC, 800.0, 80.0)
    await later(broker, clock, BTC, 79.0)
    (detail,) = await broker.get_positions_detail()
    assert detail.quantity == 20.0 and detail.entry_price == 90.0
    assert detail.opened_at_ms == opened_at and detail.mark_price == 79.0


async def test_the_same_decision_in_one_batch_is_placed_once() -> None:
    broker, _ = make_broker()
    intent = make_intent(BTC, Action.BUY, notional_usd=1000.0, reference_price=100.0)
    first, second = await broker.execute_decisions([intent, intent])
    assert first == second
    assert first.client_order_id == client_order_id(intent.decision_id, BTC, "BUY")
    assert broker.ledger.reserved_usd == Decimal("1000.2")


async def test_a_rejection_is_remembered_for_its_decision() -> None:
    broker, clock = make_broker(starting_cash_usd=500)
    intent = make_intent(BTC, Action.BUY, notional_usd=1000.0, reference_price=100.0)
    (first,) = await broker.execute_decisions([intent])
    await clock.advance(5)
    (again,) = await broker.execute_decisions([intent])
    assert first.status == again.status == "rejected" and again.at_ms == first.at_ms


async def test_portfolio_value_counts_positions_at_their_last_price() -> None:
    broker, clock = make_broker()
    await buy(broker, BTC, 1000.0, 100.0)
    assert await broker.get_portfolio_value() == 10_000.0
    await later(broker, clock, BTC, 99.0)
    assert await broker.get_portfolio_value() == pytest.approx(10_000 - 0.2 - 10.0)
    await later(broker, clock, BTC, 120.0)
    assert await broker.get_portfolio_value() == pytest.approx(10_000 - 0.2 + 200.0)


@pytest.mark.parametrize(
    ("price", "low", "high"),
    [
        (float("nan"), None, None),
        (-1.0, None, None),
        (0.0, None, None),
        (100.0, 101.0, None),
        (100.0, None, 99.0),
        (100.0, float("inf"), None),
    ],
)
async def test_impossible_market_prices_are_refused(
    price: float, low: float | None, high: float | None
) -> None:
    broker, clock = make_broker()
    with pytest.raises(ValueError, match="BTC/USDT"):
        broker.on_market_price(BTC, price, low=low, high=high, at_ms=clock.now_ms())
    assert broker.ledger.positions == {}
