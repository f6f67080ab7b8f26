"""WsServer over real loopback sockets with a real ``websockets`` client."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

import orjson
import pytest
from test_sim_ws_support import WAIT_SECS, data_of, eventually, open_recorder, step_and_collect
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from core.clock import VirtualClock
from core.scaled_clock import ScaledClock
from market.mark_price import parse_mark_price_frame
from market.recorded import resample
from market.timeframes import TIMEFRAME_MS, to_binance_symbol
from sim.feed import SimFeed
from sim.ws_server import WsServer

U = 15_000  # update interval: 20 updates per 5m bar
MAR_1_2025_MS = 1_740_787_200_000
H = 3_600_000


@pytest.fixture(scope="module")
def feed() -> SimFeed:
    return SimFeed(["BTC/USDT", "ETH/USDT"], update_interval_ms=U)


Resampled = dict[tuple[str, str], dict[int, tuple[str, ...]]]


@pytest.fixture(scope="module")
def resampled(feed: SimFeed) -> Resampled:
    """Recorded 5m bars resampled, formatted like Binance's strings: {(symbol, tf): {open: ohlcv}}."""
    from market.recorded import load_klines

    out: Resampled = {}
    for ticker in feed.tickers:
        # wide enough for anything a 24 h connection opened at 04:00 can send
        bars = load_klines(ticker, "5m").loc[MAR_1_2025_MS - 2 * H : MAR_1_2025_MS + 30 * H]
        p, q = feed.price_decimals(ticker), feed.quantity_decimals(ticker)
        for tf in ("5m", "15m", "1h", "4h"):
            frame = resample(bars, "5m", tf)
            out[to_binance_symbol(ticker), tf] = {
                t: (f"{o:.{p}f}", f"{h:.{p}f}", f"{lo:.{p}f}", f"{c:.{p}f}", f"{v:.{q}f}")
                for t, (o, h, lo, c, v) in zip(
                    frame.index.to_numpy().tolist(), frame.to_numpy().tolist(), strict=True
                )
            }
    return out


def _ohlcv(k: dict[str, Any]) -> tuple[str, ...]:
    return k["o"], k["h"], k["l"], k["c"], k["v"]


# --- every update, in order, at exactly the stream's cadence (virtual time) ---


async def test_combined_stream_sends_every_update_in_time_order(
    feed: SimFeed, resampled: Resampled
) -> None:
    clock = VirtualClock(epoch_ms=MAR_1_2025_MS)
    async with WsServer(clock, feed) as server:
        rec = await open_recorder(f"{server.url}/stream?streams=btcusdt@kline_15m/ethusdt@kline_1h")
        for _ in range(H // U):
            await step_and_collect(clock, rec, U / 1000, 2)
        await rec.aclose()

    assert all(set(f) == {"stream", "data"} for f in rec.frames)
    by_stream = defaultdict(list)
    for frame in rec.frames:
        by_stream[frame["stream"]].append(frame["data"])
    expected_times = [MAR_1_2025_MS + U * k for k in range(1, H // U + 1)]
    for name, tf, symbol in (
        ("btcusdt@kline_15m", "15m", "BTCUSDT"),
        ("ethusdt@kline_1h", "1h", "ETHUSDT"),
    ):
        events = by_stream[name]
        assert [e["E"] for e in events] == expected_times
        assert {e["s"] for e in events} == {symbol} and {e["k"]["i"] for e in events} == {tf}
        for e in events:
            k = e["k"]
            assert (
                k["t"] == e["E"] - e["E"] % TIMEFRAME_MS[tf]
                and k["T"] == k["t"] + TIMEFRAME_MS[tf] - 1
            )
            assert float(k["l"]) <= float(k["c"]) <= float(k["h"])
            assert k["x"] == ((e["E"] + U) % TIMEFRAME_MS[tf] == 0)
            if k["x"]:
                assert _ohlcv(k) == resampled[symbol, tf][k["t"]]
    assert sum(e["k"]["x"] for e in by_stream["btcusdt@kline_15m"]) == 4
    assert sum(e["k"]["x"] for e in by_stream["ethusdt@kline_1h"]) == 1
    times = [f["data"]["E"] for f in rec.frames]
    assert times == sorted(times)


async def test_market_stream_path_and_raw_ws_path(feed: SimFeed) -> None:
    clock = VirtualClock(epoch_ms=MAR_1_2025_MS)
    async with WsServer(clock, feed) as server:
        combined = await open_recorder(f"{server.url}/market/stream?streams=btcusdt@kline_4h")
        raw = await open_recorder(f"{server.url}/ws/ethusdt@kline_5m")
        await clock.advance(U / 1000)
        await combined.wait_count(1)
        await raw.wait_count(1)
        await combined.aclose()
        await raw.aclose()
    assert combined.frames[0]["stream"] == "btcusdt@kline_4h"
    assert combined.frames[0]["data"]["k"]["i"] == "4h"
    assert "stream" not in raw.frames[0]
    assert raw.frames[0]["e"] == "kline" and raw.frames[0]["s"] == "ETHUSDT"


async def test_mark_price_cadence_price_and_recorded_funding(feed: SimFeed) -> None:
    start = MAR_1_2025_MS + 5 * H  # funding last settled at 00:00, next at 08:00
    clock = VirtualClock(epoch_ms=start)
    streams = "btcusdt@markPrice/ethusdt@markPrice@1s/btcusdt@kline_5m"
    periods = (3000, 1000, U)
    async with WsServer(clock, feed) as server:
        rec = await open_recorder(f"{server.url}/stream?streams={streams}")
        for second in range(1, 31):
            now = start + 1000 * second
            await step_and_collect(clock, rec, 1.0, sum(now % p == 0 for p in periods))
        await rec.aclose()
    marks = defaultdict(list)
    for frame in rec.frames:
        marks[frame["stream"]].append(frame["data"])
    assert [m["E"] for m in marks["btcusdt@markPrice"]] == [start + 3000 * k for k in range(1, 11)]
    assert [m["E"] for m in marks["ethusdt@markPrice@1s"]] == [
        start + 1000 * k for k in range(1, 31)
    ]
    for name, ticker in (("btcusdt@markPrice", "BTC/USDT"), ("ethusdt@markPrice@1s", "ETH/USDT")):
        for m in marks[name]:
            funding = feed.funding_rate_at(ticker, m["E"])
            price = feed.last_price(ticker, m["E"])
            assert funding is not None and price is not None
            assert funding.funding_time_ms == MAR_1_2025_MS
            assert m["r"] == f"{funding.rate:.8f}"
            assert m["p"] == f"{price:.{feed.price_decimals(ticker)}f}"
            assert m["T"] == MAR_1_2025_MS + 8 * H
            # index and settle price are not recorded: left out, never sent as "0"
            assert m["e"] == "markPriceUpdate" and "i" not in m and "P" not in m
    # the daemon's own parser takes every frame exactly as the simulator sent it
    parsed = [
        parse_mark_price_frame(raw)
        for raw, frame in zip(rec.raw, rec.frames, strict=True)
        if "markPrice" in frame["stream"]
    ]
    assert len(parsed) == len(marks["btcusdt@markPrice"]) + len(marks["ethusdt@markPrice@1s"])
    for (mark,) in parsed:
        assert mark.mark_price > 0 and mark.funding_rate is not None
        assert (mark.index_price, mark.estimated_settle_price) == (None, None)
    kline_at_15s = marks["btcusdt@kline_5m"][0]
    mark_at_15s = next(m for m in marks["btcusdt@markPrice"] if m["E"] == kline_at_15s["E"])
    assert mark_at_15s["p"] == kline_at_15s["k"]["c"]  # mark = the last kline price


# --- at thousands x speed: catch up without losing a single candle close ---


async def test_high_speed_closing_frames_equal_the_recording_resampled(
    feed: SimFeed, resampled: Resampled
) -> None:
    four_h = TIMEFRAME_MS["4h"]
    start = MAR_1_2025_MS + four_h - 30_000
    clock = ScaledClock(start, speed=20_000)
    names = [f"{s}@kline_{tf}" for s in ("btcusdt", "ethusdt") for tf in ("15m", "1h", "4h")]
    end_open = MAR_1_2025_MS + 2 * four_h  # wait for the close of this 4h candle
    async with WsServer(clock, feed) as server:
        rec = await open_recorder(f"{server.url}/stream?streams={'/'.join(names)}")

        scanned = 0

        def last_4h_closed() -> bool:
            nonlocal scanned
            fresh, scanned = rec.frames[scanned:], len(rec.frames)
            return any(
                f["stream"] == "ethusdt@kline_4h"
                and f["data"]["k"]["x"]
                and f["data"]["k"]["t"] == end_open
                for f in fresh
            )

        await rec.wait(lambda: last_4h_closed() or rec.done)
        assert not rec.done, "the connection ended before the last 4h candle closed"
        await rec.aclose()
        sent = server.stats.frames_sent

    closes: Counter[tuple[str, str, int]] = Counter()
    for frame in rec.frames:
        k = frame["data"]["k"]
        if k["x"]:
            closes[frame["data"]["s"], k["i"], k["t"]] += 1
            assert _ohlcv(k) == resampled[frame["data"]["s"], k["i"]][k["t"]]
    expected = {
        (symbol, tf, t)
        for symbol in ("BTCUSDT", "ETHUSDT")
        for tf in ("15m", "1h", "4h")
        for t in range(MAR_1_2025_MS + four_h, end_open + four_h, TIMEFRAME_MS[tf])
    }
    assert set(closes) >= expected  # every candle of the 8 hours closed on the stream...
    assert max(closes.values()) == 1  # ...exactly once
    times = [f["data"]["E"] for f in rec.frames]
    assert times == sorted(times)
    assert len(rec.frames) == sent


# --- the subscription protocol, refusals ---


async def test_subscribe_list_unsubscribe_over_raw_socket(feed: SimFeed) -> None:
    clock = VirtualClock(epoch_ms=MAR_1_2025_MS)
    async with WsServer(clock, feed) as server:
        rec = await open_recorder(f"{server.url}/ws")
        requests = [
            {"method": "SUBSCRIBE", "params": ["btcusdt@kline_1h", "ethusdt@markPrice"], "id": 1},
            {"method": "LIST_SUBSCRIPTIONS", "id": 2},
            {"method": "SUBSCRIBE", "params": ["btcusdt@kline_1m"], "id": 3},
            {"method": "UNSUBSCRIBE", "params": ["ethusdt@markPrice"], "id": 4},
            {"method": "LIST_SUBSCRIPTIONS", "id": 5},
            {"method": "NOPE", "id": 6},
        ]
        for n, request in enumerate(requests, start=1):
            await rec.ws.send(orjson.dumps(request).decode())
            await rec.wait_count(n)
        await step_and_collect(clock, rec, U / 1000, 1)
        await rec.aclose()
    replies = rec.frames[: len(requests)]
    assert replies[0] == {"result": None, "id": 1}
    assert replies[1] == {"result": ["btcusdt@kline_1h", "ethusdt@markPrice"], "id": 2}
    assert replies[2]["id"] == 3 and replies[2]["error"]["code"] == 2
    assert "btcusdt@kline_1m" in replies[2]["error"]["msg"]
    assert replies[3] == {"result": None, "id": 4}
    assert replies[4] == {"result": ["btcusdt@kline_1h"], "id": 5}
    assert replies[5]["error"]["code"] == 2
    assert data_of(rec.frames[-1])["k"]["i"] == "1h"  # the subscribed stream now flows


async def test_unknown_stream_is_closed_with_the_reason(feed: SimFeed) -> None:
    async with WsServer(VirtualClock(epoch_ms=MAR_1_2025_MS), feed) as server:
        rec = await open_recorder(f"{server.url}/stream?streams=btcusdt@kline_15m/btcusdt@kline_1m")
        await rec.wait_closed()
    assert rec.close_code == 1008
    assert rec.close_reason is not None and "btcusdt@kline_1m" in rec.close_reason
    assert rec.frames == []


async def test_unknown_path_is_http_404(feed: SimFeed) -> None:
    async with WsServer(VirtualClock(epoch_ms=MAR_1_2025_MS), feed) as server:
        with pytest.raises(InvalidStatus) as refused:
            await connect(f"{server.url}/v1/stream", open_timeout=WAIT_SECS)
    assert refused.value.response.status_code == 404


def test_only_loopback_is_served(feed: SimFeed) -> None:
    with pytest.raises(ValueError, match="loopback"):
        WsServer(VirtualClock(), feed, host="0.0.0.0")


# --- keep-alive and the 24 h cut, on simulated time ---


async def test_server_pings_every_three_simulated_minutes(feed: SimFeed) -> None:
    clock = VirtualClock(epoch_ms=MAR_1_2025_MS)
    async with WsServer(clock, feed) as server:
        rec = await open_recorder(f"{server.url}/ws")
        await clock.advance(179.9)
        assert server.stats.pings_sent == 0
        await clock.advance(0.1)
        await eventually(lambda: server.stats.pongs_received == 1)
        await clock.advance(180)
        await eventually(lambda: server.stats.pongs_received == 2)
        assert server.stats.pings_sent == 2
        await rec.aclose()


async def test_connection_is_cut_after_24_simulated_hours(feed: SimFeed) -> None:
    clock = VirtualClock(epoch_ms=MAR_1_2025_MS)
    async with WsServer(clock, feed) as server:
        rec = await open_recorder(f"{server.url}/ws")
        await clock.advance(24 * 3600 - 1)
        assert not rec.done and server.stats.connections_open == 1
        await clock.advance(1)
        await rec.wait_closed()
        assert server.stats.connections_open == 0
    assert rec.close_code == 1001
    assert rec.close_reason is not None and "lifetime" in rec.close_reason


async def test_connection_lifetime_is_configurable(feed: SimFeed) -> None:
    clock = VirtualClock(epoch_ms=MAR_1_2025_MS)
    async with WsServer(clock, feed, max_connection_secs=600) as server:
        rec = await open_recorder(f"{server.url}/ws/btcusdt@kline_5m")
        await clock.advance(600)
        await rec.wait_closed()
    assert rec.close_code == 1001
    assert len(rec.frames) >= 1
