"""The Broker contract's price band (part of ``contract.broker_contract.BrokerContract``).

A BUY limit far from the market is rejected, reserving nothing, as Binance's PERCENT_PRICE filter
refuses it (the simulator's exchangeInfo: 1.05 / 0.95 of the price); without it the paper broker
rested a limit at 1e-300 with its cash reserved, and filled one at twice the market on the next
tick. A limit within the band below the market rests as usual. (Within the band ABOVE the market
the brokers part ways on purpose: the paper broker rests it, the exchange fills it at once.)
"""

from __future__ import annotations

import pytest

from broker.port import Action
from contract.broker_harness import BrokerHarness, make_intent, position_of


class PriceBandContract:
    """Mixed into ``BrokerContract``; not collected itself."""

    @pytest.mark.parametrize("factor", [1e-300, 0.5, 0.94, 1.06, 2.0, 1e300])
    async def test_a_buy_limit_far_from_the_market_is_rejected_and_reserves_nothing(
        self, harness: BrokerHarness, factor: float
    ) -> None:
        money = pytest.approx(await harness.broker.get_cash(), abs=harness.money_tolerance_usd)
        price = await harness.market.price(harness.ticker)
        intent = make_intent(
            harness.ticker,
            Action.BUY,
            notional_usd=harness.order_notional_usd,
            reference_price=price * factor,
        )
        (result,) = await harness.broker.execute_decisions([intent])
        assert result.status == "rejected" and result.reason, result
        assert result.filled_quantity == 0.0 and result.fee_usd == 0.0
        assert await harness.broker.get_cash() == money
        assert list(await harness.broker.get_open_orders()) == []
        found = await harness.broker.lookup(result.client_order_id)
        assert found is not None and found.status == "rejected"

        # the market trading on (through the limits above it) fills nothing
        await harness.market.trade(harness.ticker, low=price * 0.999, high=price, close=price)
        assert position_of(await harness.broker.get_positions_detail(), harness.ticker) is None
        assert await harness.broker.get_cash() == money

    async def test_a_buy_limit_inside_the_band_below_the_market_rests(
        self, harness: BrokerHarness
    ) -> None:
        price = await harness.market.price(harness.ticker)
        intent = make_intent(
            harness.ticker,
            Action.BUY,
            notional_usd=harness.order_notional_usd,
            reference_price=price * 0.96,
        )
        (result,) = await harness.broker.execute_decisions([intent])
        assert result.status == "open", result
        (order,) = await harness.broker.get_open_orders()
        # an exchange rounds the limit to its tick (0.1 on a BTC price of 84,000: 1.2e-6 of it)
        assert order.limit_price == pytest.approx(price * 0.96, rel=1e-6)
