"""The sim REST server's Binance market-data endpoints, over real HTTP on loopback.

The server runs on a VirtualClock that nobody advances unless a test says so: a fixed sim instant,
so every expectation is computed from the recorded files for exactly that instant.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_budget import examples
from test_sim_rest_support import (
    get_json,
    running_server,
    shared_feed,
    utc_ms,
)

from core.clock import VirtualClock
from market.recorded import load_funding, load_klines, resample
from market.timeframes import TIMEFRAME_MS, candle_open_ms
from sim.feed import KlineState
from sim.rest_market import klines
from sim.rest_server import RestServer

# mid-candle for every timeframe: 4h 08:00, 1h 10:00, 15m 10:30, 5m 10:35
NOW_MS = utc_ms(2025, 5, 14, 10, 37) + 12_345
BTC = "BTC/USDT"


@pytest.fixture
async def server() -> AsyncIterator[RestServer]:
    async with running_server(VirtualClock(NOW_MS)) as srv:
        yield srv


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


def recorded(ticker: str, timeframe: str) -> pd.DataFrame:
    return resample(load_klines(ticker, "5m"), "5m", timeframe)


def assert_row_equals_recorded(row: list[object], expected: pd.Series) -> None:
    assert [float(str(v)) for v in row[1:5]] == [
        expected["open"],
        expected["high"],
        expected["low"],
        expected["close"],
    ]
    assert float(str(row[5])) == pytest.approx(expected["volume"], rel=1e-12)


async def test_ping_and_time_answer_sim_time(
    server: RestServer, http: aiohttp.ClientSession
) -> None:
    status, body, _ = await get_json(http, server.url + "/fapi/v1/ping")
    assert (status, body) == (200, {})
    status, body, _ = await get_json(http, server.url + "/fapi/v1/time")
    assert (status, body) == (200, {"serverTime": NOW_MS})


async def test_exchange_info_lists_the_tickers_as_usdt_perpetuals(
    server: RestServer, http: aiohttp.ClientSession
) -> None:
    status, body, _ = await get_json(http, server.url + "/fapi/v1/exchangeInfo")
    assert status == 200
    assert body["serverTime"] == NOW_MS
    assert {"rateLimitType": "REQUEST_WEIGHT", "interval": "MINUTE", "intervalNum": 1,
            "limit": 2400} in body["rateLimits"]  # fmt: skip
    symbols = {s["symbol"]: s for s in body["symbols"]}
    assert set(symbols) == {"BTCUSDT", "ETHUSDT", "SOLUSDT"}
    btc = symbols["BTCUSDT"]
    assert (btc["contractType"], btc["status"], btc["marginAsset"]) == (
        "PERPETUAL",
        "TRADING",
        "USDT",
    )
    filters = {f["filterType"]: f for f in btc["filters"]}
    assert {"PRICE_FILTER", "LOT_SIZE", "MARKET_LOT_SIZE", "MIN_NOTIONAL"} <= set(filters)
    assert filters["PRICE_FILTER"]["tickSize"] == "0.1"  # BTC is recorded with 1 decimal
    assert filters["LOT_SIZE"]["stepSize"] == "0.001"
    assert "onboardDate" not in btc  # not recorded


@pytest.mark.parametrize("timeframe", ["5m", "15m", "1h", "4h"])
async def test_klines_latest_end_with_the_candle_in_progress(
    server: RestServer, http: aiohttp.ClientSession, timeframe: str
) -> None:
    status, rows, headers = await get_json(
        http, server.url + "/fapi/v1/klines", symbol="BTCUSDT", interval=timeframe, limit=20
    )
    assert status == 200
    assert len(rows) == 20
    step = TIMEFRAME_MS[timeframe]
    opens = [r[0] for r in rows]
    assert opens == list(range(opens[0], opens[0] + 20 * step, step))
    assert opens[-1] == candle_open_ms(NOW_MS, timeframe)  # the partial candle, nothing later
    assert all(r[6] == r[0] + step - 1 for r in rows)
    frame = recorded(BTC, timeframe)
    for row in rows[:-1]:
        assert_row_equals_recorded(row, frame.loc[row[0]])
    partial, full = rows[-1], frame.loc[opens[-1]]
    assert float(partial[5]) < full["volume"]  # only part of the candle has traded
    assert full["low"] <= float(partial[4]) <= full["high"]
    assert partial[7:11] == ["0", 0, "0", "0"]  # quote volume, trades, taker volumes: not recorded
    assert headers["X-MBX-USED-WEIGHT-1M"] == "1"


async def test_klines_default_limit_is_500(server: RestServer, http: aiohttp.ClientSession) -> None:
    _, rows, headers = await get_json(
        http, server.url + "/fapi/v1/klines", symbol="BTCUSDT", interval="5m"
    )
    assert len(rows) == 500
    assert headers["X-MBX-USED-WEIGHT-1M"] == "5"


async def test_klines_limit_above_1500_is_clamped(
    server: RestServer, http: aiohttp.ClientSession
) -> None:
    _, rows, headers = await get_json(
        http, server.url + "/fapi/v1/klines", symbol="ETHUSDT", interval="5m", limit=5000
    )
    assert len(rows) == 1500
    assert headers["X-MBX-USED-WEIGHT-1M"] == "10"


async def test_klines_start_time_gives_the_first_limit_candles(
    server: RestServer, http: aiohttp.ClientSession
) -> None:
    start = utc_ms(2025, 5, 1, 1, 0) + 1  # not aligned: the first candle opens at or after it
    _, rows, _ = await get_json(
        http, server.url + "/fapi/v1/klines", symbol="SOLUSDT", interval="1h",
        startTime=start, limit=3,
    )  # fmt: skip
    assert [r[0] for r in rows] == [utc_ms(2025, 5, 1, h) for h in (2, 3, 4)]
    frame = recorded("SOL/USDT", "1h")
    for row in rows:
        assert_row_equals_recorded(row, frame.loc[row[0]])


async def test_klines_end_time_bounds_open_times(
    server: RestServer, http: aiohttp.ClientSession
) -> None:
    end = utc_ms(2025, 5, 1, 8, 0)  # a candle opening exactly at endTime is included
    _, rows, _ = await get_json(
        http, server.url + "/fapi/v1/klines", symbol="BTCUSDT", interval="4h",
        endTime=end, limit=2,
    )  # fmt: skip
    assert [r[0] for r in rows] == [utc_ms(2025, 5, 1, 4), end]
    _, rows, _ = await get_json(
        http, server.url + "/fapi/v1/klines", symbol="BTCUSDT", interval="4h",
        startTime=utc_ms(2025, 5, 1), endTime=end, limit=10,
    )  # fmt: skip
    assert [r[0] for r in rows] == [utc_ms(2025, 5, 1, h) for h in (0, 4, 8)]


async def test_klines_never_serve_the_future(
    server: RestServer, http: aiohttp.ClientSession
) -> None:
    _, rows, _ = await get_json(
        http, server.url + "/fapi/v1/klines", symbol="BTCUSDT", interval="15m",
        startTime=NOW_MS - 3 * TIMEFRAME_MS["15m"], endTime=NOW_MS + 10 * 86_400_000,
    )  # fmt: skip
    assert rows and max(r[0] for r in rows) <= NOW_MS
    _, rows, _ = await get_json(
        http, server.url + "/fapi/v1/klines", symbol="BTCUSDT", interval="15m",
        startTime=NOW_MS + 1,
    )  # fmt: skip
    assert rows == []


@pytest.mark.parametrize(
    ("params", "code"),
    [
        ({"symbol": "DOGEUSDT", "interval": "1h"}, -1121),
        ({"symbol": "BTCUSDT", "interval": "2h"}, -1120),
        ({"interval": "1h"}, -1102),
        ({"symbol": "BTCUSDT"}, -1102),
        ({"symbol": "BTCUSDT", "interval": "1h", "startTime": "yesterday"}, -1100),
        ({"symbol": "BTCUSDT", "interval": "1h", "startTime": 2, "endTime": 1}, -1023),
        ({"symbol": "BTCUSDT", "interval": "1h", "limit": 0}, -1130),
    ],
)
async def test_klines_reject_bad_requests_like_binance(
    server: RestServer, http: aiohttp.ClientSession, params: dict[str, object], code: int
) -> None:
    status, body, headers = await get_json(http, server.url + "/fapi/v1/klines", **params)
    assert status == 400
    assert body["code"] == code and body["msg"]
    assert "X-MBX-USED-WEIGHT-1M" in headers
    if code == -1121:
        assert body == {"code": -1121, "msg": "Invalid symbol."}


def reference_klines(
    candles: list[KlineState], start: int | None, end: int | None, limit: int
) -> list[int]:
    """Binance's rules, spelled out over every candle visible at NOW_MS (oldest first)."""
    chosen = [
        c.open_time_ms
        for c in candles
        if (start is None or c.open_time_ms >= start) and (end is None or c.open_time_ms <= end)
    ]
    return chosen[:limit] if start is not None else chosen[-limit:]


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    timeframe=st.sampled_from(["5m", "15m", "1h", "4h"]),
    start_back=st.one_of(st.none(), st.integers(0, 40 * 3_600_000)),
    end_back=st.one_of(st.none(), st.integers(-3_600_000, 40 * 3_600_000)),
    limit=st.integers(1, 30),
)
def test_klines_follow_binance_rules_for_any_window(
    timeframe: str, start_back: int | None, end_back: int | None, limit: int
) -> None:
    feed = shared_feed()
    start = None if start_back is None else NOW_MS - start_back
    end = None if end_back is None else NOW_MS - end_back
    if start is not None and end is not None and start > end:
        return  # rejected with -1023, covered above
    horizon = NOW_MS - 45 * 3_600_000
    visible = feed.closed_candles(BTC, timeframe, horizon, NOW_MS, 10_000)
    current = feed.kline_state(BTC, timeframe, NOW_MS)
    assert current is not None
    visible.append(current)
    # ``sim.rest_market.klines`` is pure given the instant: no server needed for the property test
    got = klines(feed, BTC, timeframe, start, end, limit, NOW_MS)
    expected = reference_klines(visible, start, end, limit)
    if start is None and len(expected) < limit:
        return  # the reference only looked back 45 h
    assert [c.open_time_ms for c in got] == expected
    assert all(c.open_time_ms <= NOW_MS for c in got)


async def test_premium_index_serves_recorded_funding_and_no_index_price(
    server: RestServer, http: aiohttp.ClientSession
) -> None:
    status, body, _ = await get_json(http, server.url + "/fapi/v1/premiumIndex", symbol="ETHUSDT")
    assert status == 200
    funding = load_funding("ETH/USDT")
    latest = funding[funding.index <= NOW_MS].iloc[-1]
    assert float(body["lastFundingRate"]) == pytest.approx(latest["funding_rate"], abs=1e-12)
    assert body["nextFundingTime"] == utc_ms(2025, 5, 14, 16)
    assert float(body["markPrice"]) == pytest.approx(
        shared_feed().last_price("ETH/USDT", NOW_MS), abs=0.01
    )
    assert body["time"] == NOW_MS
    for unrecorded in ("indexPrice", "estimatedSettlePrice", "interestRate"):
        assert unrecorded not in body
    _, every, headers = await get_json(http, server.url + "/fapi/v1/premiumIndex")
    assert {row["symbol"] for row in every} == {"BTCUSDT", "ETHUSDT", "SOLUSDT"}
    assert headers["X-MBX-USED-WEIGHT-1M"] == "11"  # 1 with a symbol + 10 without


async def test_funding_rate_history_equals_the_recording(
    server: RestServer, http: aiohttp.ClientSession
) -> None:
    start = utc_ms(2025, 5, 1)
    _, rows, _ = await get_json(
        http, server.url + "/fapi/v1/fundingRate", symbol="BTCUSDT", startTime=start, limit=1000
    )
    funding = load_funding(BTC)
    expected = funding[(funding.index >= start) & (funding.index <= NOW_MS)]
    assert [r["fundingTime"] for r in rows] == expected.index.tolist()
    np.testing.assert_allclose(
        [float(r["fundingRate"]) for r in rows], expected["funding_rate"], atol=1e-12
    )
    _, latest, _ = await get_json(http, server.url + "/fapi/v1/fundingRate", symbol="BTCUSDT")
    assert len(latest) == 100  # default limit: the most recent 100
    assert latest[-1]["fundingTime"] == expected.index[-1]  # nothing after now


async def test_ticker_24h_is_computed_from_recorded_bars(
    server: RestServer, http: aiohttp.ClientSession
) -> None:
    _, body, headers = await get_json(http, server.url + "/fapi/v1/ticker/24hr", symbol="BTCUSDT")
    bars = load_klines(BTC, "5m")
    first_open = candle_open_ms(NOW_MS - 86_400_000, "5m") + TIMEFRAME_MS["5m"]
    closed = bars[(bars.index >= first_open) & (bars.index < candle_open_ms(NOW_MS, "5m"))]
    current = shared_feed().kline_state(BTC, "5m", NOW_MS)
    assert current is not None
    assert float(body["openPrice"]) == closed["open"].iloc[0]
    assert body["openTime"] == first_open and body["closeTime"] == NOW_MS
    assert float(body["highPrice"]) == max(closed["high"].max(), current.high)
    assert float(body["lowPrice"]) == min(closed["low"].min(), current.low)
    assert float(body["volume"]) == pytest.approx(closed["volume"].sum() + current.volume, abs=1e-3)
    assert (body["quoteVolume"], body["count"], body["weightedAvgPrice"]) == ("0", 0, "0")
    assert headers["X-MBX-USED-WEIGHT-1M"] == "1"
    _, every, headers = await get_json(http, server.url + "/fapi/v1/ticker/24hr")
    assert len(every) == 3
    assert headers["X-MBX-USED-WEIGHT-1M"] == "41"


async def test_ticker_price_is_the_last_price(
    server: RestServer, http: aiohttp.ClientSession
) -> None:
    _, body, _ = await get_json(http, server.url + "/fapi/v1/ticker/price", symbol="SOLUSDT")
    last = shared_feed().last_price("SOL/USDT", NOW_MS)
    assert last is not None
    assert body["symbol"] == "SOLUSDT"
    assert float(body["price"]) == pytest.approx(last, abs=0.01)


async def test_after_the_recording_ends_prices_are_not_available(
    http: aiohttp.ClientSession,
) -> None:
    _, end_ms = shared_feed().span_ms(BTC)
    async with running_server(VirtualClock(end_ms + 3_600_000)) as srv:
        status, body, _ = await get_json(http, srv.url + "/fapi/v1/premiumIndex", symbol="BTCUSDT")
        assert status == 404 and body["code"] == -1020
        _, rows, _ = await get_json(
            http, srv.url + "/fapi/v1/klines", symbol="BTCUSDT", interval="5m", limit=3
        )
        assert rows[-1][6] == end_ms  # the last recorded bar, closed; nothing invented after it
