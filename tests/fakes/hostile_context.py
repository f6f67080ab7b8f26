"""Helpers of the hostile-answer tests (``tests/integration/test_derivatives_hostile_*``): the
fake providers' sources read through ``CachedSource`` as the monitor reads them, each Binance
endpoint with its good answer, and how long a read held the event loop."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from core.clock import VirtualClock
from derivatives.binance import BinanceDerivatives
from derivatives.cache import Cached, CachedSource, CachePolicy
from fakes.context_bodies import (
    basis,
    open_interest_hist,
    premium_index,
    taker_ratio,
    top_long_short,
)
from fakes.context_servers import (
    BASIS,
    OPEN_INTEREST_HIST,
    PREMIUM_INDEX,
    TAKER_RATIO,
    TOP_LONG_SHORT,
    ContextServers,
)
from market.ccxt_client import make_binanceusdm

EPOCH_MS = 1_740_787_200_000
TICKERS = ("BTC/USDT",)
Fetch = Callable[[BinanceDerivatives], Callable[[], Awaitable[Any]]]


def cached(fetch: Callable[[], Awaitable[Any]]) -> CachedSource[Any]:
    policy = CachePolicy(ttl_secs=60.0, timeout_secs=5.0)
    return CachedSource("test", fetch, VirtualClock(EPOCH_MS), policy, rand=lambda: 0.0)


async def read_binance(servers: ContextServers, fetch: Fetch) -> Cached[Any]:
    exchange = make_binanceusdm(servers.url, timeout_ms=5_000)
    exchange.timeout_on_exit = 0
    try:
        return await cached(fetch(BinanceDerivatives(exchange, TICKERS))).read()
    finally:
        await exchange.close()


#: path, the fetch that reads it, a good answer, the row's time field
BINANCE: dict[str, tuple[str, Fetch, Callable[[], list[dict[str, Any]]], str]] = {
    "premiumIndex": (
        PREMIUM_INDEX,
        lambda b: b.fetch_funding_rates,
        lambda: [premium_index("BTCUSDT")],
        "time",
    ),
    "openInterestHist": (
        OPEN_INTEREST_HIST,
        lambda b: b.fetch_open_interest,
        lambda: open_interest_hist("BTCUSDT"),
        "timestamp",
    ),
    "takerlongshortRatio": (TAKER_RATIO, lambda b: b.fetch_taker_delta, taker_ratio, "timestamp"),
    "topLongShortAccountRatio": (
        TOP_LONG_SHORT,
        lambda b: b.fetch_long_short,
        lambda: top_long_short("BTCUSDT"),
        "timestamp",
    ),
    "basis": (BASIS, lambda b: b.fetch_basis, lambda: basis("BTCUSDT"), "timestamp"),
}


def patient(fetch: Callable[[], Awaitable[Any]]) -> CachedSource[Any]:
    policy = CachePolicy(ttl_secs=60.0, timeout_secs=300.0)
    return CachedSource("slow", fetch, VirtualClock(EPOCH_MS), policy)
