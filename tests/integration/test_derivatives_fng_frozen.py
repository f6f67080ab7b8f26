"""Live Fear & Greed from a source that goes on answering but stops updating (the simulator's
``/fng/`` on loopback, its answer frozen at one day's index by a rewrite, through the real
sources and the derivatives monitor's poll): every answer was taken as today's, so the daemon
showed that day's index for ever. A daily index is now today's only within its day, as the
simulator and replay serve it: past that the source has no value, and the last one is served
stale for the cache's 3 h, then it is unavailable "stale since ..." naming the old index."""

from __future__ import annotations

from typing import Any

from core.bus import EventBus
from core.clock import DAY_MS, VirtualClock
from derivatives.config import DerivativesConfig
from derivatives.monitor import DerivativesMonitor, DerivativesReading
from derivatives.sources import build_context_fields
from market.ccxt_client import make_binanceusdm
from sim.feed import SimFeed
from sim.rest_server import RestServer

NOW_MS = 1_740_832_440_000  # 2025-03-01T12:34:00Z
HOUR_MS = 3_600_000
DAY_ENDS_MS = 1_740_873_600_000  # 2025-03-02T00:00:00Z: the frozen index's day is over


async def test_an_index_that_stops_updating_goes_stale_after_its_day() -> None:
    clock = VirtualClock(NOW_MS)
    readings: dict[int, DerivativesReading] = {}
    async with RestServer(clock, SimFeed(("BTC/USDT",))) as server:
        config = DerivativesConfig(
            binance_rest_url=server.url,
            fng_base_url=server.url,
            defillama_base_url=None,
            coingecko_base_url=None,
            binance_spot_url=None,
            etf_flow_url=None,
        )
        exchange = make_binanceusdm(server.url)
        exchange.timeout_on_exit = 0
        try:
            fields = build_context_fields(config, clock, ("BTC/USDT",), exchange)
            monitor = DerivativesMonitor(clock, EventBus(), fields, config=config)
            frozen: list[Any] = []

            def freeze(body: Any) -> Any:
                frozen[:1] = frozen or [body]
                return frozen[0]

            server.faults.rewrite_next(freeze, 1000, path="/fng/")
            for hour in range(30):
                readings[hour] = await monitor.poll_once()
                await clock.advance(3600.0)
        finally:
            await exchange.close()
    first = readings[0].values["fear_greed"]
    assert first["timestamp_ms"] == DAY_ENDS_MS - DAY_MS
    last_good_ms = NOW_MS + 11 * HOUR_MS  # 23:34, the last poll within the index's day
    for hour, reading in readings.items():
        at_ms = NOW_MS + hour * HOUR_MS
        if at_ms < last_good_ms + 3 * HOUR_MS:  # within the day, then served stale for 3 h
            assert reading.values.get("fear_greed") == first, hour
            assert ("fear_greed" in reading.stale_fields) == (at_ms >= DAY_ENDS_MS), hour
        else:
            assert "fear_greed" not in reading.values, (hour, reading.values)
            why = reading.unavailable["fear_greed"]
            assert why.startswith("stale since 2025-03-02T00:34:00Z"), why
            assert "2025-03-01" in why, why
