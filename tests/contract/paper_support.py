"""Test helpers for the paper broker: a market driver on a virtual clock, and a ready harness."""

from __future__ import annotations

from pathlib import Path

from broker.paper import PaperBroker
from contract.broker_harness import BrokerHarness
from core.bus import EventBus
from core.clock import VirtualClock

EPOCH_MS = 1_740_787_200_000  # 2025-03-01, inside the bundled data's span
START_PRICES = {"BTC/USDT": 84_321.5, "ETH/USDT": 2_217.37, "SOL/USDT": 142.83}


class PaperMarket:
    """Feeds a PaperBroker the market; each trade happens one virtual second after the last."""

    def __init__(self, broker: PaperBroker, clock: VirtualClock, prices: dict[str, float]) -> None:
        self.broker = broker
        self.clock = clock
        self._prices = dict(prices)
        for ticker, price in self._prices.items():
            broker.on_market_price(ticker, price, at_ms=clock.now_ms())

    async def price(self, ticker: str) -> float:
        return self._prices[ticker]

    async def trade(self, ticker: str, *, low: float, high: float, close: float) -> None:
        await self.clock.advance(1.0)
        self.broker.on_market_price(ticker, close, low=low, high=high, at_ms=self.clock.now_ms())
        self._prices[ticker] = close


def paper_harness(
    state_path: Path | None = None, bus: EventBus | None = None
) -> tuple[BrokerHarness, PaperBroker, PaperMarket]:
    clock = VirtualClock(EPOCH_MS)
    broker = PaperBroker(clock, state_path=state_path, bus=bus)
    market = PaperMarket(broker, clock, START_PRICES)
    harness = BrokerHarness(
        broker=broker,
        market=market,
        ticker="BTC/USDT",
        other_ticker="ETH/USDT",
        starting_cash_usd=10_000.0,
        maker_fee_pct=0.02,
        taker_fee_pct=0.05,
        slippage_pct=0.05,
        quantity_step=0.000001,
        outlive_order_ttl=lambda: clock.advance(broker.terms.limit_ttl_secs + 1.0),
    )
    return harness, broker, market
