"""Each websocket fault does what it says, seen from a real client over loopback."""

from __future__ import annotations

import math

import orjson
import pytest
from test_sim_ws_support import WAIT_SECS, eventually, open_recorder, step_and_collect
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from core.clock import VirtualClock
from sim.feed import SimFeed
from sim.ws_server import WsServer

U = 15_000
MAR_1_2025_MS = 1_740_787_200_000
STREAMS = "/stream?streams=btcusdt@kline_5m"


@pytest.fixture(scope="module")
def feed() -> SimFeed:
    return SimFeed(["BTC/USDT"], update_interval_ms=U)


async def test_drop_connections_closes_abruptly(feed: SimFeed) -> None:
    clock = VirtualClock(epoch_ms=MAR_1_2025_MS)
    async with WsServer(clock, feed) as server:
        recs = [await open_recorder(server.url + STREAMS) for _ in range(2)]
        await step_and_collect(clock, recs[0], U / 1000, 1)
        assert server.faults.drop_connections() == 2
        for rec in recs:
            await rec.wait_closed()
            assert rec.close_code == 1006  # no closing handshake: an abnormal closure
        assert server.faults.counts.connections_dropped == 2
        again = await open_recorder(server.url + STREAMS)  # the server itself is still up
        await step_and_collect(clock, again, U / 1000, 1)
        await again.aclose()


async def test_stall_sends_nothing_but_keeps_the_connection_open(feed: SimFeed) -> None:
    clock = VirtualClock(epoch_ms=MAR_1_2025_MS)
    async with WsServer(clock, feed) as server:
        rec = await open_recorder(server.url + STREAMS)
        await step_and_collect(clock, rec, U / 1000, 1)
        stall_start = clock.now_ms()
        server.faults.stall(600)
        await clock.advance(599)  # ten minutes of due frames, none sent; pings still flow
        await clock.advance(1)
        await rec.wait_count(2)
        assert not rec.done
        first_after = rec.frames[1]["data"]
        assert first_after["E"] >= stall_start + 600_000
        assert len(rec.frames) == 2
        await eventually(lambda: server.stats.pongs_received == 3)  # pings at 180, 360, 540 s
        assert server.faults.counts.stalls == 1
        await step_and_collect(clock, rec, U / 1000, 1)  # and frames flow on schedule again
        assert rec.frames[-1]["data"]["E"] == first_after["E"] + U
        await rec.aclose()


async def test_malformed_frames_come_before_real_ones(feed: SimFeed) -> None:
    clock = VirtualClock(epoch_ms=MAR_1_2025_MS)
    async with WsServer(clock, feed) as server:
        rec = await open_recorder(server.url + STREAMS)
        server.faults.send_malformed(4)
        for _ in range(4):
            await step_and_collect(clock, rec, U / 1000, 2)
        await step_and_collect(clock, rec, U / 1000, 1)
        await rec.aclose()
    bad, good = rec.frames[0:8:2], rec.frames[1:8:2]
    assert bad[0] is None and rec.raw[0].startswith("<<simulated garbage")
    assert bad[1] is None and orjson.dumps(good[1]).decode().startswith(rec.raw[2])
    assert math.isnan(float(bad[2]["data"]["k"]["c"]))
    assert float(bad[3]["data"]["k"]["c"]) < 0
    assert all(g["data"]["e"] == "kline" and float(g["data"]["k"]["c"]) > 0 for g in good)
    assert rec.frames[8]["data"]["E"] == good[-1]["data"]["E"] + U  # then normal frames
    assert server.faults.counts.malformed_sent == 4


async def test_out_of_order_resends_an_older_kline_frame(feed: SimFeed) -> None:
    clock = VirtualClock(epoch_ms=MAR_1_2025_MS)
    async with WsServer(clock, feed) as server:
        rec = await open_recorder(server.url + STREAMS)
        for _ in range(3):
            await step_and_collect(clock, rec, U / 1000, 1)
        server.faults.send_out_of_order(1)
        await step_and_collect(clock, rec, U / 1000, 2)
        await rec.aclose()
    times = [f["data"]["E"] for f in rec.frames]
    assert times[:4] == [MAR_1_2025_MS + U * k for k in range(1, 5)]
    assert times[4] < times[3]  # the stale frame arrived after a newer one
    assert rec.raw[4] in rec.raw[:3]  # byte-for-byte a frame sent earlier
    assert server.faults.counts.out_of_order_sent == 1


async def test_server_shutdown_announces_then_closes(feed: SimFeed) -> None:
    clock = VirtualClock(epoch_ms=MAR_1_2025_MS)
    async with WsServer(clock, feed) as server:
        rec = await open_recorder(server.url + STREAMS)
        await step_and_collect(clock, rec, U / 1000, 1)
        assert server.faults.server_shutdown() == 1
        await rec.wait_closed()
    assert rec.frames[-1] == {"e": "serverShutdown", "E": MAR_1_2025_MS + U}
    assert rec.close_code == 1001
    assert server.faults.counts.shutdowns_announced == 1


async def test_server_shutdown_with_grace_keeps_streaming_until_the_close(feed: SimFeed) -> None:
    clock = VirtualClock(epoch_ms=MAR_1_2025_MS)
    async with WsServer(clock, feed) as server:
        rec = await open_recorder(server.url + STREAMS)
        server.faults.server_shutdown(grace_secs_sim=2 * U / 1000)
        await rec.wait_count(1)
        await step_and_collect(clock, rec, U / 1000, 1)
        assert not rec.done
        await clock.advance(U / 1000)
        await rec.wait_closed()
    assert rec.frames[0]["e"] == "serverShutdown"
    assert rec.frames[1]["data"]["e"] == "kline"
    assert rec.close_code == 1001


async def test_rejected_handshakes_get_http_503_then_recover(feed: SimFeed) -> None:
    async with WsServer(VirtualClock(epoch_ms=MAR_1_2025_MS), feed) as server:
        server.faults.reject_handshakes(1)
        with pytest.raises(InvalidStatus) as refused:
            await connect(server.url + STREAMS, open_timeout=WAIT_SECS)
        assert refused.value.response.status_code == 503
        ws = await connect(server.url + STREAMS, open_timeout=WAIT_SECS)
        await ws.close()
        assert server.faults.counts.handshakes_rejected == 1
