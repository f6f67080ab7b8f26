"""The forceOrder stream feeds the liquidation window through real sockets; bad frames are dropped
and counted; a dropped connection is retried."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import orjson
import pytest
import websockets
from fakes.context_bodies import FORCE_ORDER_DOC_FRAME

from core.scaled_clock import ScaledClock
from derivatives.liquidation_stream import LiquidationStream
from derivatives.liquidations import LiquidationWindow

FRAME = FORCE_ORDER_DOC_FRAME


@pytest.fixture
async def server() -> AsyncIterator[tuple[str, list[str]]]:
    paths: list[str] = []

    async def handler(ws: websockets.ServerConnection) -> None:
        assert ws.request is not None
        paths.append(ws.request.path)
        await ws.send(orjson.dumps({"stream": "btcusdt@forceOrder", "data": FRAME}).decode())
        await ws.send('{"stream": "btcusdt@forceOrder", "data": {"e": "forceOrder"}}')
        await ws.send("not json")
        await ws.close()  # the client must come back

    async with websockets.serve(handler, "127.0.0.1", 0) as srv:
        port = next(iter(srv.sockets)).getsockname()[1]
        yield f"ws://127.0.0.1:{port}", paths


async def test_liquidations_reach_the_window_and_the_stream_reconnects(
    server: tuple[str, list[str]],
) -> None:
    base_url, paths = server
    window = LiquidationWindow(cascade_usd=250.0)
    stream = LiquidationStream(
        ScaledClock(FRAME["E"], speed=1000.0),  # type: ignore[arg-type]
        window,
        base_url=base_url,
        tickers=["BTC/USDT", "ETH/USDT"],
        reconnect_base_secs=1.0,
    )
    task = asyncio.create_task(stream.run())
    while stream.received < 2:
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert paths[0] == "/market/stream?streams=btcusdt@forceOrder/ethusdt@forceOrder"
    assert stream.connects >= 2 and stream.rejected >= 4
    summary = window.summary(FRAME["E"] + 1_000)  # type: ignore[operator]
    assert summary["count_1h"] == stream.received
    assert summary["long_usd_1h"] == pytest.approx(stream.received * 9910 * 0.014)
    assert summary["short_usd_1h"] == 0
    assert summary["cascade"] is True  # >= 250 USD within 5 minutes
