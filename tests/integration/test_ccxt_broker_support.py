"""Shared helpers for the CcxtBroker and sim order tests (no tests here).

``ccxt_sim`` starts the sim's REST server on loopback (a clock running at wall speed from 2025-03-01,
shiftable to fake clock skew), resets its account, pins the traded prices, and builds a CcxtBroker
on a signed ccxt ``binanceusdm`` pointed at it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from test_sim_rest_support import shared_feed

from broker.ccxt_broker import CcxtBroker, build_exchange
from broker.live_guard import ApiKeys
from contract.broker_harness import BrokerHarness
from contract.paper_support import EPOCH_MS, START_PRICES
from core.bus import EventBus
from core.clock import WallClock
from core.scaled_clock import ScaledClock
from market.ccxt_client import RetryPolicy
from sim.order_book import SimAccountConfig
from sim.orders import TEST_API_KEY, TEST_API_SECRET
from sim.rest_server import RestServer

TICKERS = tuple(START_PRICES)
ACCOUNT = SimAccountConfig(
    starting_balance_usd=10_000.0, maker_fee_pct=0.02, taker_fee_pct=0.05, slippage_pct=0.05
)
FAST_RETRIES = RetryPolicy(max_attempts=3, base_secs=0.01, cap_secs=0.05)
TEST_KEYS = ApiKeys.model_validate({"api_key": TEST_API_KEY, "api_secret": TEST_API_SECRET})


class SkewableClock:
    """The sim's clock: wall speed from ``EPOCH_MS``, plus ``offset_ms`` a test can change."""

    def __init__(self) -> None:
        self._inner = ScaledClock(EPOCH_MS, 1.0)
        self.offset_ms = 0

    def now_ms(self) -> int:
        return self._inner.now_ms() + self.offset_ms

    def monotonic_secs(self) -> float:
        return self._inner.monotonic_secs()

    async def sleep(self, secs: float) -> None:
        await self._inner.sleep(secs)


class SimMarket:
    """The contract's MarketDriver: moves the sim's prices through its Python handle."""

    def __init__(self, server: RestServer) -> None:
        self._server = server

    async def price(self, ticker: str) -> float:
        return self._server.orders.book.price(ticker)

    async def trade(self, ticker: str, *, low: float, high: float, close: float) -> None:
        self._server.orders.trade(ticker, low=low, high=high, close=close)


@dataclass
class CcxtSim:
    server: RestServer
    clock: SkewableClock
    journal_path: Path
    market: SimMarket

    def new_broker(
        self, *, max_sends: int = 3, timeout_ms: int = 10_000, bus: EventBus | None = None
    ) -> CcxtBroker:
        """A broker (and its own ccxt client) on the same sim account and journal."""
        exchange = build_exchange(
            "testnet",
            TEST_KEYS,
            rest_url=self.server.url,
            enable_rate_limit=False,
            timeout_ms=timeout_ms,
        )
        return CcxtBroker(
            exchange,
            WallClock(),
            self.journal_path,
            tickers=TICKERS,
            retry_policy=FAST_RETRIES,
            max_sends=max_sends,
            bus=bus,
            maker_fee_pct=ACCOUNT.maker_fee_pct,
            taker_fee_pct=ACCOUNT.taker_fee_pct,
        )

    def harness(self, broker: CcxtBroker) -> BrokerHarness:
        return BrokerHarness(
            broker=broker,
            market=self.market,
            ticker="BTC/USDT",
            other_ticker="ETH/USDT",
            starting_cash_usd=ACCOUNT.starting_balance_usd,
            maker_fee_pct=ACCOUNT.maker_fee_pct,
            taker_fee_pct=ACCOUNT.taker_fee_pct,
            slippage_pct=ACCOUNT.slippage_pct,
            quantity_step=10.0 ** -shared_feed().quantity_decimals("BTC/USDT"),
        )


@asynccontextmanager
async def ccxt_sim(tmp_path: Path) -> AsyncIterator[CcxtSim]:
    clock = SkewableClock()
    server = RestServer(clock, shared_feed())
    server.orders.book.reset(ACCOUNT)
    for ticker, price in START_PRICES.items():
        server.orders.trade(ticker, low=price, high=price, close=price)
    await server.start()
    try:
        yield CcxtSim(server, clock, tmp_path / "orders.jsonl", SimMarket(server))
    finally:
        await server.stop()


@asynccontextmanager
async def running_broker(
    sim: CcxtSim, bus: EventBus | None = None, **kwargs: int
) -> AsyncIterator[CcxtBroker]:
    broker = sim.new_broker(bus=bus, **kwargs)
    try:
        yield broker
    finally:
        await broker.close()
