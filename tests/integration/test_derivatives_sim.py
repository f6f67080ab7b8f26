"""The derivatives monitor against the simulator's REST server (recorded data on loopback).

The snapshot's funding rates and Fear & Greed come from the recording; every other context field
is null with the reason the sim (or the configuration) gives. Sim time is a VirtualClock that
stands still: the REST server and the monitor agree on 2025-03-01 12:34 UTC.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator

import pytest
from fakes.brokers import IdleBroker

from agent.snapshot import MarketSnapshot
from agent.snapshot_builder import SnapshotBuilder
from core.bus import EventBus
from core.clock import VirtualClock
from derivatives.config import DerivativesConfig
from derivatives.liquidations import NOT_CONNECTED
from derivatives.monitor import DerivativesContext, DerivativesMonitor
from derivatives.sources import build_context_fields
from gate.metrics import MetricBoard
from market.aggregator import MultiTFAggregator
from market.ccxt_client import make_binanceusdm
from market.features import FeatureTracker
from market.recorded import load_fear_greed, load_funding
from sim.feed import SimFeed
from sim.rest_server import RestServer

TICKERS = ("BTC/USDT", "ETH/USDT")
NOW_MS = 1_740_832_440_000  # 2025-03-01T12:34:00Z
NOT_RECORDED = "is not available in the recorded data"


@pytest.fixture(scope="module")
def feed() -> SimFeed:
    return SimFeed(TICKERS)


@pytest.fixture
async def sim(feed: SimFeed) -> AsyncIterator[tuple[VirtualClock, RestServer]]:
    clock = VirtualClock(NOW_MS)
    async with RestServer(clock, feed) as server:
        yield clock, server


def recorded_funding(ticker: str, at_ms: int) -> float:
    frame = load_funding(ticker)
    return float(frame[frame.index <= at_ms]["funding_rate"].iloc[-1])


async def test_snapshot_has_recorded_funding_and_fear_greed_and_reasons_for_the_rest(
    sim: tuple[VirtualClock, RestServer],
) -> None:
    clock, server = sim
    config = DerivativesConfig(
        binance_rest_url=server.url,
        fng_base_url=server.url,
        defillama_base_url=None,
        coingecko_base_url=None,
        binance_spot_url=server.url,
        etf_flow_url=None,
    )
    exchange = make_binanceusdm(server.url)
    exchange.timeout_on_exit = 0  # plain HTTP on loopback: no TLS shutdown to wait for
    try:
        fields = build_context_fields(config, clock, TICKERS, exchange)
        board = MetricBoard()
        monitor = DerivativesMonitor(clock, EventBus(), fields, board=board, config=config)
        await monitor.poll_once()
        snapshot = await snapshot_from(clock, monitor)
    finally:
        await exchange.close()

    expected_funding = {t: recorded_funding(t, NOW_MS) for t in TICKERS}
    assert snapshot.funding_rates == pytest.approx(expected_funding)
    fng = load_fear_greed()
    day = fng[fng.index <= NOW_MS // 1000].iloc[-1]
    assert snapshot.fear_greed is not None
    assert snapshot.fear_greed["value"] == int(day["value"])
    assert snapshot.fear_greed["classification"] == day["classification"]
    assert board.get("btc_funding_rate") == pytest.approx(expected_funding["BTC/USDT"])
    assert board.get("fear_greed") == float(day["value"])

    # the funding-only signal, computed by hand from the recorded rates
    by_hand = sum(-math.tanh(r / 0.0005) * 0.35 for r in expected_funding.values()) / 2
    assert snapshot.derivatives_signal == pytest.approx(by_hand)

    for name in ("open_interest", "taker_delta", "long_short_ratio", "basis"):
        assert getattr(snapshot, name) is None
        assert NOT_RECORDED in snapshot.unavailable[name], snapshot.unavailable[name]
    assert snapshot.liquidations is None and snapshot.unavailable["liquidations"] == NOT_CONNECTED
    assert snapshot.etf_flow is None
    assert "no URL configured" in snapshot.unavailable["etf_flow"]
    assert "no base URL configured" in snapshot.unavailable["stablecoin_supply"]
    assert "no base URL configured" in snapshot.unavailable["news_summary"]
    assert server.requests["/fapi/v1/premiumIndex"] == 1
    # the gold hedge from the sim's recorded spot klines (12:00 .. 12:34 is in progress)
    assert snapshot.paxg is not None and "paxg" not in snapshot.unavailable
    assert snapshot.paxg["price_at_ms"] == NOW_MS - 34 * 60_000 - 1
    assert "PAXG/USDT" not in snapshot.tickers  # context, not a traded ticker


async def test_after_the_fear_greed_recording_ends_it_is_null_with_the_sims_reason(
    feed: SimFeed,
) -> None:
    clock = VirtualClock(1_751_328_000_000)  # 2025-07-01: funding recorded, F&G not
    async with RestServer(clock, feed) as server:
        config = DerivativesConfig(
            binance_rest_url=server.url,
            fng_base_url=server.url,
            defillama_base_url=None,
            coingecko_base_url=None,
            binance_spot_url=server.url,
            etf_flow_url=None,
        )
        exchange = make_binanceusdm(server.url)
        exchange.timeout_on_exit = 0
        try:
            fields = build_context_fields(config, clock, TICKERS, exchange)
            monitor = DerivativesMonitor(clock, EventBus(), fields, config=config)
            reading = await monitor.poll_once()
        finally:
            await exchange.close()
    assert "fear_greed" not in reading.values
    assert "no Fear & Greed value recorded" in reading.unavailable["fear_greed"]
    assert set(reading.values["funding_rates"]) == set(TICKERS)


async def snapshot_from(clock: VirtualClock, monitor: DerivativesMonitor) -> MarketSnapshot:
    features = FeatureTracker()
    builder = SnapshotBuilder(
        clock,
        tickers=TICKERS,
        market=MultiTFAggregator(EventBus(), observers=[features]),
        features=features,
        broker=IdleBroker(),
        agent_memory=lambda: "",
        peak_prices=dict,
        regime=no_regime,
        context_sources=[DerivativesContext(monitor)],
    )
    return await builder.build(["test"])


async def no_regime() -> None:
    return None
