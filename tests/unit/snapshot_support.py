"""What the snapshot-builder tests share: a market seeded with the five days of recording before
2025-03-01 (a module-scoped fixture), a broker holding one SOL position, and a builder on them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import pytest

from agent.snapshot_builder import SnapshotBuilder
from broker.port import OpenOrder, OrderResult, PositionDetail
from core.bus import EventBus
from core.clock import VirtualClock
from core.events import MarketTick
from market.aggregator import MultiTFAggregator
from market.features import FeatureTracker
from market.recorded import load_klines, resample, to_candles
from regime.snapshot import RegimeSnapshot

TICKERS = ("BTC/USDT", "ETH/USDT", "SOL/USDT")
START_MS = 1_740_787_200_000  # 2025-03-01 00:00 UTC


class FakeBroker:
    def __init__(
        self, *, fail: bool = False, orders: Sequence[OpenOrder] = (), orders_fail: bool = False
    ) -> None:
        self.fail = fail
        self.orders = tuple(orders)
        self.orders_fail = orders_fail

    async def execute_decisions(self, intents: Sequence[Any]) -> Sequence[OrderResult]:
        return ()

    async def get_positions_detail(self) -> Sequence[PositionDetail]:
        if self.fail:
            raise ConnectionError("exchange down")
        return [
            PositionDetail(
                ticker="SOL/USDT",
                quantity=2.0,
                entry_price=140.0,
                mark_price=147.0,
                opened_at_ms=START_MS - 3_600_000,
            )
        ]

    async def get_portfolio_value(self) -> float:
        return 10_014.0

    async def get_cash(self) -> float:
        return 9_720.0

    async def get_open_orders(self) -> Sequence[OpenOrder]:
        if self.orders_fail:
            raise TimeoutError("openOrders timed out")
        return self.orders

    async def cancel(self, client_order_id: str) -> OrderResult | None:
        return None

    async def lookup(self, client_order_id: str) -> OrderResult | None:
        return None


@pytest.fixture(scope="module")
def seeded() -> tuple[MultiTFAggregator, FeatureTracker]:
    features = FeatureTracker()
    agg = MultiTFAggregator(EventBus(), observers=[features])
    for ticker in TICKERS:
        five = load_klines(ticker, "5m")
        five = five[(five.index >= START_MS - 5 * 86_400_000) & (five.index < START_MS)]
        for tf in ("15m", "1h", "4h"):
            frame = resample(five, "5m", tf)
            agg.seed(
                ticker,
                tf,
                to_candles(frame),
            )
        last = agg.last_closed(ticker, "15m")
        assert last is not None
        agg.update(  # the first live tick of the next 15m candle
            MarketTick(
                ticker=ticker,
                timeframe="15m",
                open_time_ms=START_MS,
                close_time_ms=START_MS + 899_999,
                open=last.close,
                high=last.close,
                low=last.close,
                close=last.close,
                volume=1.0,
                closed=False,
                event_time_ms=START_MS + 250,
            )
        )
    return agg, features


def returning(regime: RegimeSnapshot | None) -> Callable[[], Awaitable[RegimeSnapshot | None]]:
    async def read() -> RegimeSnapshot | None:
        return regime

    return read


def make_builder(
    agg: MultiTFAggregator,
    features: FeatureTracker,
    *,
    broker: FakeBroker | None = None,
    sources: Sequence[Any] = (),
    regime: RegimeSnapshot | None = None,
) -> SnapshotBuilder:
    return SnapshotBuilder(
        VirtualClock(epoch_ms=START_MS),
        tickers=TICKERS,
        market=agg,
        features=features,
        broker=broker or FakeBroker(),
        agent_memory=lambda: "BTC chops in ranges on weekends.",
        peak_prices=lambda: {"SOL/USDT": 150.0},
        regime=returning(regime),
        context_sources=sources,
    )
