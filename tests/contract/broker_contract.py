"""The Broker contract: what every ``broker.port.Broker`` must do, written against the port only.

Use it by subclassing ``BrokerContract`` in a test module and providing a ``harness`` fixture that
builds a FRESH broker (no positions, no open orders, ``starting_cash_usd`` free) plus a
``MarketDriver`` that makes the market trade where a test says::

    class TestMyBrokerContract(BrokerContract):
        @pytest.fixture
        async def harness(self) -> AsyncIterator[BrokerHarness]:
            ...
            yield BrokerHarness(broker=..., market=..., ...)

(``BrokerHarness``, ``MarketDriver`` and ``make_intent`` live in ``contract.broker_harness``.)

The rules the suite pins down (the paper broker's, and the ones the ccxt broker keeps against the
simulator):

- a BUY is a limit at the intent's reference price; it rests until the market trades strictly
  below it, then fills at the limit paying the maker fee; a touch of the limit does not fill it;
- a BUY limit far from the market (half or twice the price, 1e-300 or 1e300 times it) is
  rejected and reserves nothing, as Binance's PERCENT_PRICE filter refuses it; one within 5 %
  below the market rests as usual;
- a SELL is a market order that closes the position at the market minus slippage, paying the taker
  fee; without a position it is rejected with a reason containing "no position";
- client order ids are ``broker.ids.client_order_id(decision_id, ticker, action)``, so the same
  intents executed twice place nothing new; ``lookup`` finds orders by that id;
- ``get_cash`` is free cash: an open BUY holds back its cost plus fee, ``cancel`` gives it back;
- ``get_portfolio_value`` = free cash + reserved cash + positions at the market price;
- ``get_open_orders`` lists each resting BUY (ticker, limit, unfilled quantity, notional) until it
  fills, is cancelled or expires: the risk caps count it as held.
"""

from __future__ import annotations

import pytest

from broker.ids import client_order_id, is_valid_client_order_id
from broker.port import Action, OpenOrder, OrderResult
from contract.broker_harness import BrokerHarness, make_intent, position_of
from contract.broker_price_band import PriceBandContract


class BrokerContract(PriceBandContract):
    """Not collected itself (no ``Test`` prefix); subclasses provide the ``harness`` fixture."""

    # ---- helpers

    @staticmethod
    def money(h: BrokerHarness, value: float) -> object:
        return pytest.approx(value, abs=h.money_tolerance_usd)

    @staticmethod
    def price_approx(h: BrokerHarness, value: float) -> object:
        return pytest.approx(value, rel=h.price_rel_tolerance)

    async def place_buy(self, h: BrokerHarness, *, decision_id: str | None = None) -> OrderResult:
        price = await h.market.price(h.ticker)
        intent = make_intent(
            h.ticker,
            Action.BUY,
            notional_usd=h.order_notional_usd,
            reference_price=price,
            decision_id=decision_id,
        )
        (result,) = await h.broker.execute_decisions([intent])
        assert result.status == "open", result
        return result

    async def trade_through(self, h: BrokerHarness, limit: float) -> None:
        low = limit * 0.999
        await h.market.trade(h.ticker, low=low, high=limit, close=limit * 0.9995)

    async def buy_filled(self, h: BrokerHarness) -> OrderResult:
        placed = await self.place_buy(h)
        await self.trade_through(h, await h.market.price(h.ticker))
        filled = await h.broker.lookup(placed.client_order_id)
        assert filled is not None and filled.status == "filled", filled
        return filled

    # ---- client order ids and lookup

    async def test_client_order_id_derives_from_the_decision(self, harness: BrokerHarness) -> None:
        price = await harness.market.price(harness.ticker)
        intent = make_intent(
            harness.ticker,
            Action.BUY,
            notional_usd=harness.order_notional_usd,
            reference_price=price,
        )
        (result,) = await harness.broker.execute_decisions([intent])
        assert result.client_order_id == client_order_id(intent.decision_id, harness.ticker, "BUY")
        assert is_valid_client_order_id(result.client_order_id)
        assert (result.ticker, result.side) == (harness.ticker, "buy")
        assert result.requested_notional_usd == pytest.approx(harness.order_notional_usd)

    async def test_lookup_by_client_order_id(self, harness: BrokerHarness) -> None:
        placed = await self.place_buy(harness)
        found = await harness.broker.lookup(placed.client_order_id)
        assert found is not None
        assert (found.client_order_id, found.status, found.side, found.ticker) == (
            placed.client_order_id,
            "open",
            "buy",
            harness.ticker,
        )
        unknown = client_order_id("never-executed", harness.ticker, "BUY")
        assert await harness.broker.lookup(unknown) is None

    # ---- BUY limits

    async def test_buy_rests_then_fills_when_the_market_trades_through(
        self, harness: BrokerHarness
    ) -> None:
        price = await harness.market.price(harness.ticker)
        placed = await self.place_buy(harness)
        assert placed.filled_quantity == 0.0 and placed.fee_usd == 0.0
        assert position_of(await harness.broker.get_positions_detail(), harness.ticker) is None

        await self.trade_through(harness, price)

        filled = await harness.broker.lookup(placed.client_order_id)
        assert filled is not None and filled.status == "filled"
        assert filled.average_price == self.price_approx(harness, price)
        wanted = harness.order_notional_usd / price
        assert wanted - harness.quantity_step <= filled.filled_quantity <= wanted * (1 + 1e-12)
        position = position_of(await harness.broker.get_positions_detail(), harness.ticker)
        assert position is not None
        assert position.quantity == pytest.approx(filled.filled_quantity, rel=1e-12)
        assert position.entry_price == self.price_approx(harness, price)

    async def test_buy_does_not_fill_when_the_market_only_touches_the_limit(
        self, harness: BrokerHarness
    ) -> None:
        price = await harness.market.price(harness.ticker)
        placed = await self.place_buy(harness)
        await harness.market.trade(harness.ticker, low=price, high=price * 1.001, close=price)
        await harness.market.trade(harness.ticker, low=price, high=price, close=price)
        still = await harness.broker.lookup(placed.client_order_id)
        assert still is not None and still.status == "open"
        assert position_of(await harness.broker.get_positions_detail(), harness.ticker) is None

    async def test_buy_beyond_the_cash_is_rejected_and_changes_nothing(
        self, harness: BrokerHarness
    ) -> None:
        cash = await harness.broker.get_cash()
        price = await harness.market.price(harness.ticker)
        intent = make_intent(
            harness.ticker,
            Action.BUY,
            notional_usd=harness.starting_cash_usd * 2,
            reference_price=price,
        )
        (result,) = await harness.broker.execute_decisions([intent])
        assert result.status == "rejected" and result.reason
        assert await harness.broker.get_cash() == self.money(harness, cash)
        assert await harness.broker.get_portfolio_value() == self.money(harness, cash)

    # ---- cancel

    async def test_cancel_of_an_open_buy_releases_its_cash(self, harness: BrokerHarness) -> None:
        cash = await harness.broker.get_cash()
        assert cash == self.money(harness, harness.starting_cash_usd)
        price = await harness.market.price(harness.ticker)
        placed = await self.place_buy(harness)
        reserved = cash - await harness.broker.get_cash()
        expected_cost = placed.requested_notional_usd * (1 + harness.maker_fee_pct / 100)
        assert 0 < reserved <= expected_cost + harness.money_tolerance_usd

        cancelled = await harness.broker.cancel(placed.client_order_id)
        assert cancelled is not None and cancelled.status == "cancelled"
        assert await harness.broker.get_cash() == self.money(harness, cash)
        again = await harness.broker.lookup(placed.client_order_id)
        assert again is not None and again.status == "cancelled"

        await self.trade_through(harness, price)  # a cancelled order never fills
        after = await harness.broker.lookup(placed.client_order_id)
        assert after is not None and after.status == "cancelled"
        assert position_of(await harness.broker.get_positions_detail(), harness.ticker) is None
        unknown = client_order_id("never-executed", harness.ticker, "BUY")
        assert await harness.broker.cancel(unknown) is None

    async def test_cancel_of_a_filled_order_changes_nothing(self, harness: BrokerHarness) -> None:
        filled = await self.buy_filled(harness)
        cash = await harness.broker.get_cash()
        result = await harness.broker.cancel(filled.client_order_id)
        assert result is not None and result.status == "filled"
        assert await harness.broker.get_cash() == self.money(harness, cash)
        position = position_of(await harness.broker.get_positions_detail(), harness.ticker)
        assert position is not None
        assert position.quantity == pytest.approx(filled.filled_quantity, rel=1e-12)

    # ---- SELL

    async def test_sell_closes_the_position_at_the_market_minus_slippage(
        self, harness: BrokerHarness
    ) -> None:
        bought = await self.buy_filled(harness)
        price = await harness.market.price(harness.ticker)
        intent = make_intent(
            harness.ticker,
            Action.SELL,
            notional_usd=bought.filled_quantity * price,
            reference_price=price,
        )
        (sold,) = await harness.broker.execute_decisions([intent])
        assert sold.status == "filled", sold
        assert sold.side == "sell"
        assert sold.filled_quantity == pytest.approx(bought.filled_quantity, rel=1e-12)
        assert sold.average_price == self.price_approx(
            harness, price * (1 - harness.slippage_pct / 100)
        )
        assert position_of(await harness.broker.get_positions_detail(), harness.ticker) is None

    async def test_sell_without_a_position_is_rejected(self, harness: BrokerHarness) -> None:
        cash = await harness.broker.get_cash()
        price = await harness.market.price(harness.other_ticker)
        intent = make_intent(
            harness.other_ticker,
            Action.SELL,
            notional_usd=harness.order_notional_usd,
            reference_price=price,
        )
        (result,) = await harness.broker.execute_decisions([intent])
        assert result.status == "rejected"
        assert "no position" in result.reason
        assert result.filled_quantity == 0.0 and result.fee_usd == 0.0
        assert await harness.broker.get_cash() == self.money(harness, cash)

    # ---- idempotency

    async def test_the_same_intents_executed_twice_place_once(self, harness: BrokerHarness) -> None:
        price = await harness.market.price(harness.ticker)
        other_price = await harness.market.price(harness.other_ticker)
        intents = [
            make_intent(
                harness.ticker,
                Action.BUY,
                notional_usd=harness.order_notional_usd,
                reference_price=price,
            ),
            make_intent(
                harness.other_ticker,
                Action.BUY,
                notional_usd=harness.order_notional_usd,
                reference_price=other_price,
            ),
        ]
        first = await harness.broker.execute_decisions(intents)
        cash = await harness.broker.get_cash()
        second = await harness.broker.execute_decisions(intents)
        assert [r.client_order_id for r in second] == [r.client_order_id for r in first]
        assert [r.status for r in second] == ["open", "open"]
        assert await harness.broker.get_cash() == self.money(harness, cash)

        await self.trade_through(harness, price)
        quantity = await self._held(harness)
        third = await harness.broker.execute_decisions(intents)  # e.g. replayed after a crash
        assert [r.status for r in third] == ["filled", "open"]
        assert await self._held(harness) == quantity
        assert await harness.broker.get_cash() == self.money(harness, cash)

    async def _held(self, h: BrokerHarness) -> float:
        position = position_of(await h.broker.get_positions_detail(), h.ticker)
        assert position is not None
        return position.quantity

    # ---- open orders

    async def open_orders(self, h: BrokerHarness) -> list[OpenOrder]:
        orders = list(await h.broker.get_open_orders())
        assert len({o.client_order_id for o in orders}) == len(orders), orders
        return orders

    async def test_a_resting_buy_is_an_open_order_with_its_notional(
        self, harness: BrokerHarness
    ) -> None:
        assert await self.open_orders(harness) == []
        price = await harness.market.price(harness.ticker)
        placed = await self.place_buy(harness)

        (order,) = await self.open_orders(harness)
        assert (order.client_order_id, order.ticker, order.side) == (
            placed.client_order_id,
            harness.ticker,
            "buy",
        )
        assert order.limit_price == self.price_approx(harness, price)
        wanted = harness.order_notional_usd / price
        assert wanted - harness.quantity_step <= order.quantity <= wanted * (1 + 1e-12)
        assert order.notional_usd == self.money(harness, order.quantity * price)
        assert order.notional_usd <= harness.order_notional_usd + harness.money_tolerance_usd
        assert order.placed_at_ms > 0
        assert order.expires_at_ms is None or order.expires_at_ms > order.placed_at_ms

    async def test_open_orders_list_every_resting_buy_oldest_first(
        self, harness: BrokerHarness
    ) -> None:
        first = await self._buy_other(harness)
        second = await self.place_buy(harness)  # maybe in the same millisecond
        orders = await self.open_orders(harness)
        assert [o.client_order_id for o in orders] == [
            first.client_order_id,
            second.client_order_id,
        ]
        assert [o.ticker for o in orders] == [harness.other_ticker, harness.ticker]
        assert orders[0].placed_at_ms <= orders[1].placed_at_ms

    async def test_a_filled_buy_is_no_longer_open(self, harness: BrokerHarness) -> None:
        filled = await self.buy_filled(harness)
        assert await self.open_orders(harness) == []
        position = position_of(await harness.broker.get_positions_detail(), harness.ticker)
        assert position is not None
        assert position.quantity == pytest.approx(filled.filled_quantity, rel=1e-12)

    async def test_a_cancelled_buy_is_no_longer_open(self, harness: BrokerHarness) -> None:
        placed = await self.place_buy(harness)
        kept = await self._buy_other(harness)
        cancelled = await harness.broker.cancel(placed.client_order_id)
        assert cancelled is not None and cancelled.status == "cancelled"
        (left,) = await self.open_orders(harness)
        assert left.client_order_id == kept.client_order_id

    async def test_an_expired_buy_is_no_longer_open(self, harness: BrokerHarness) -> None:
        if harness.outlive_order_ttl is None:
            pytest.skip("this broker's BUY limits are good till cancelled: they never expire")
        placed = await self.place_buy(harness)
        (order,) = await self.open_orders(harness)
        assert order.expires_at_ms is not None
        cash = await harness.broker.get_cash()
        await harness.outlive_order_ttl()
        assert await self.open_orders(harness) == []
        expired = await harness.broker.lookup(placed.client_order_id)
        assert expired is not None and expired.status == "cancelled"
        assert await harness.broker.get_cash() > cash  # its reserved cash came back

    async def _buy_other(self, h: BrokerHarness) -> OrderResult:
        price = await h.market.price(h.other_ticker)
        intent = make_intent(
            h.other_ticker, Action.BUY, notional_usd=h.order_notional_usd, reference_price=price
        )
        (result,) = await h.broker.execute_decisions([intent])
        assert result.status == "open", result
        return result

    # ---- money

    async def test_portfolio_value_is_cash_plus_reserved_plus_positions_at_market(
        self, harness: BrokerHarness
    ) -> None:
        start = await harness.broker.get_portfolio_value()
        assert start == self.money(harness, harness.starting_cash_usd)
        price = await harness.market.price(harness.ticker)
        placed = await self.place_buy(harness)
        # reserving cash for an order moves money, it does not spend it
        assert await harness.broker.get_portfolio_value() == self.money(harness, start)

        await self.trade_through(harness, price)
        filled = await harness.broker.lookup(placed.client_order_id)
        assert filled is not None and filled.status == "filled"
        moved = price * 1.02
        await harness.market.trade(harness.ticker, low=price, high=moved, close=moved)

        positions = await harness.broker.get_positions_detail()
        position = position_of(positions, harness.ticker)
        assert position is not None and position.mark_price == self.price_approx(harness, moved)
        cash = await harness.broker.get_cash()
        value = await harness.broker.get_portfolio_value()
        assert value == self.money(harness, cash + sum(p.notional_usd for p in positions))
        gain = filled.filled_quantity * (moved - price)
        assert value == self.money(harness, start - filled.fee_usd + gain)

    async def test_fees_are_charged_at_the_configured_rates(self, harness: BrokerHarness) -> None:
        bought = await self.buy_filled(harness)
        assert bought.average_price is not None
        buy_value = bought.filled_quantity * bought.average_price
        assert bought.fee_usd == self.money(harness, buy_value * harness.maker_fee_pct / 100)

        price = await harness.market.price(harness.ticker)
        intent = make_intent(
            harness.ticker,
            Action.SELL,
            notional_usd=bought.filled_quantity * price,
            reference_price=price,
        )
        (sold,) = await harness.broker.execute_decisions([intent])
        assert sold.status == "filled" and sold.average_price is not None
        sell_value = sold.filled_quantity * sold.average_price
        assert sold.fee_usd == self.money(harness, sell_value * harness.taker_fee_pct / 100)

        expected_cash = (
            harness.starting_cash_usd - buy_value - bought.fee_usd + sell_value - sold.fee_usd
        )
        assert await harness.broker.get_cash() == self.money(harness, expected_cash)
        assert await harness.broker.get_portfolio_value() == self.money(harness, expected_cash)
