"""Shared helpers for the sim REST and ccxt history tests (no tests here).

The recorded data is loaded once per process (``shared_feed``); each test starts its own
``RestServer`` on a free loopback port.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import aiohttp

from core.clock import Clock
from market.ccxt_client import make_binanceusdm
from sim.feed import SimFeed
from sim.rest_server import RestServer

TICKERS = ("BTC/USDT", "ETH/USDT", "SOL/USDT")


def utc_ms(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> int:
    return int(datetime(year, month, day, hour, minute, tzinfo=UTC).timestamp() * 1000)


@functools.cache
def shared_feed() -> SimFeed:
    return SimFeed(TICKERS)


class RecordingClock:
    """Delegates to ``inner`` and records every sleep request (seconds of clock time)."""

    def __init__(self, inner: Clock) -> None:
        self.inner = inner
        self.sleeps: list[float] = []

    def now_ms(self) -> int:
        return self.inner.now_ms()

    def monotonic_secs(self) -> float:
        return self.inner.monotonic_secs()

    async def sleep(self, secs: float) -> None:
        self.sleeps.append(secs)
        await self.inner.sleep(secs)


@asynccontextmanager
async def running_server(clock: Clock, **kwargs: Any) -> AsyncIterator[RestServer]:
    server = RestServer(clock, shared_feed(), **kwargs)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@asynccontextmanager
async def sim_exchange(url: str, **kwargs: Any) -> AsyncIterator[Any]:
    """A ccxt binanceusdm pointed at the sim, closed afterwards."""
    exchange = make_binanceusdm(url, **kwargs)
    try:
        yield exchange
    finally:
        await exchange.close()


async def get_json(
    session: aiohttp.ClientSession, url: str, **params: Any
) -> tuple[int, Any, dict[str, str]]:
    async with session.get(url, params={k: str(v) for k, v in params.items()}) as response:
        body = await response.json(content_type=None)
        return response.status, body, dict(response.headers)
