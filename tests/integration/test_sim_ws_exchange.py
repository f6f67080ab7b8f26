"""SimExchange: websocket and REST on one clock agree; the standalone entry point serves both."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from test_sim_ws_support import WAIT_SECS, open_recorder

from core.clock import VirtualClock
from core.errors import RefuseToStartError
from core.scaled_clock import ScaledClock
from sim.exchange import SimExchange, run_standalone
from sim.feed import SimFeed

U = 15_000
MAR_1_2025_MS = 1_740_787_200_000


@pytest.fixture(scope="module")
def feed() -> SimFeed:
    return SimFeed(["BTC/USDT"], update_interval_ms=U)


async def _get_json(url: str) -> Any:
    async with (
        aiohttp.ClientSession() as session,
        session.get(url, timeout=aiohttp.ClientTimeout(total=WAIT_SECS)) as response,
    ):
        assert response.status == 200, await response.text()
        return await response.json()


async def test_ws_closing_frame_equals_the_rest_kline(feed: SimFeed) -> None:
    start = MAR_1_2025_MS + 900_000 - 2 * U  # two updates before the first 15m close
    clock = VirtualClock(epoch_ms=start)
    async with SimExchange(clock, feed.tickers, update_interval_ms=U, feed=feed) as exchange:
        assert exchange.ws_base_url.startswith("ws://127.0.0.1:")
        assert exchange.rest_url.startswith("http://127.0.0.1:")
        rec = await open_recorder(f"{exchange.ws_base_url}/stream?streams=btcusdt@kline_15m")
        await clock.advance(U / 1000)
        await rec.wait_count(1)
        await clock.advance(U / 1000)  # the candle has closed (T passed)
        await rec.wait_count(2)
        rows = await _get_json(
            f"{exchange.rest_url}/fapi/v1/klines?symbol=BTCUSDT&interval=15m&limit=2"
        )
        await rec.aclose()
        assert exchange.ws_faults.counts.connections_dropped == 0
        assert exchange.rest_faults is exchange.rest_faults
    closing = rec.frames[0]["data"]["k"]
    assert closing["x"] is True and closing["t"] == MAR_1_2025_MS
    rest_row = next(row for row in rows if row[0] == MAR_1_2025_MS)
    assert rest_row[1:7] == [
        closing["o"],
        closing["h"],
        closing["l"],
        closing["c"],
        closing["v"],
        closing["T"],
    ]


def test_feed_and_interval_must_agree(feed: SimFeed) -> None:
    with pytest.raises(ValueError, match="15000"):
        SimExchange(VirtualClock(), feed.tickers, update_interval_ms=250, feed=feed)


async def test_urls_need_a_started_exchange(feed: SimFeed) -> None:
    exchange = SimExchange(VirtualClock(), feed.tickers, update_interval_ms=U, feed=feed)
    with pytest.raises(RuntimeError):
        _ = exchange.rest_url


async def test_run_standalone_serves_until_cancelled() -> None:
    ready: asyncio.Future[SimExchange] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(
        run_standalone(
            "127.0.0.1",
            0,
            0,
            MAR_1_2025_MS,
            1000.0,
            ["BTC/USDT"],
            U,
            on_ready=ready.set_result,
        )
    )
    exchange = await asyncio.wait_for(ready, WAIT_SECS)
    assert isinstance(exchange.clock, ScaledClock) and exchange.clock.speed == 1000.0
    rec = await open_recorder(f"{exchange.ws_base_url}/ws/btcusdt@kline_5m")
    await rec.wait_count(1)  # 15 s of sim time at 1000x: 15 ms
    assert rec.frames[0]["e"] == "kline"
    pong = await _get_json(f"{exchange.rest_url}/fapi/v1/ping")
    assert pong == {}
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await rec.wait_closed()
    assert rec.close_code == 1001  # the server went away cleanly


async def test_run_standalone_refuses_a_start_outside_the_recording() -> None:
    with pytest.raises(RefuseToStartError, match="outside the recording"):
        await run_standalone("127.0.0.1", 0, 0, 1_600_000_000_000, 60.0, ["BTC/USDT"], U)


async def test_run_standalone_refuses_a_port_it_cannot_bind() -> None:
    """A taken port was a traceback out of ``vigil sim``; now a refusal naming host and ports."""
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        with pytest.raises(RefuseToStartError, match=f"cannot listen on 127.0.0.1.*port {port}"):
            await run_standalone("127.0.0.1", port, 0, MAR_1_2025_MS, 60.0, ["BTC/USDT"], U)
        with pytest.raises(RefuseToStartError, match=f"REST port {port}"):
            await run_standalone("127.0.0.1", 0, port, MAR_1_2025_MS, 60.0, ["BTC/USDT"], U)


async def test_run_standalone_refuses_a_ticker_without_recordings(tmp_path: Path) -> None:
    with pytest.raises(RefuseToStartError, match="no recorded 5m klines for BTC/USDT"):
        await run_standalone(
            "127.0.0.1", 0, 0, MAR_1_2025_MS, 60.0, ["BTC/USDT"], U, data_dir=tmp_path
        )
