"""The sim REST server's weights, 429/418 rules, injected faults, Fear & Greed and the endpoints
whose data was never recorded, over real HTTP on loopback (sim time on a VirtualClock)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_sim_rest_support import get_json, running_server, utc_ms

from core.clock import VirtualClock
from market.recorded import load_fear_greed
from sim.rest_errors import request_weight
from sim.rest_faults import MINUTE_MS, RestFaults, WeightLimiter

NOW_MS = utc_ms(2025, 5, 14, 10, 37) + 12_345  # 47.655 s left in this sim minute
KLINES = "/fapi/v1/klines"


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.mark.parametrize(
    ("limit", "weight"), [(1, 1), (99, 1), (100, 2), (499, 2), (500, 5), (1000, 5), (1001, 10), (1500, 10), (9999, 10)]
)  # fmt: skip
def test_klines_weight_follows_the_limit(limit: int, weight: int) -> None:
    assert request_weight(KLINES, {"limit": str(limit)}) == weight


def test_weights_without_a_symbol_are_heavier() -> None:
    assert request_weight("/fapi/v1/ticker/24hr", {}) == 40
    assert request_weight("/fapi/v1/ticker/24hr", {"symbol": "BTCUSDT"}) == 1
    assert request_weight("/fapi/v1/ticker/price", {}) == 2
    assert request_weight(KLINES, {}) == 5  # default limit 500


async def test_used_weight_accumulates_and_resets_each_sim_minute(
    http: aiohttp.ClientSession,
) -> None:
    clock = VirtualClock(NOW_MS)
    async with running_server(clock) as srv:
        used = []
        for limit in (10, 200, 600):
            _, _, headers = await get_json(
                http, srv.url + KLINES, symbol="BTCUSDT", interval="1h", limit=limit
            )
            used.append(headers["X-MBX-USED-WEIGHT-1M"])
        assert used == ["1", "3", "8"]
        await clock.advance(60)  # the next sim minute
        _, _, headers = await get_json(http, srv.url + "/fapi/v1/time")
        assert headers["X-MBX-USED-WEIGHT-1M"] == "1"


async def test_over_budget_gets_429_with_retry_after_then_418_ban(
    http: aiohttp.ClientSession,
) -> None:
    clock = VirtualClock(NOW_MS)
    async with running_server(clock, weight_limit_1m=3, requests_after_429_before_ban=2) as srv:
        statuses = []
        for _ in range(3):
            status, _, _ = await get_json(http, srv.url + "/fapi/v1/ping")
            statuses.append(status)
        status, body, headers = await get_json(http, srv.url + "/fapi/v1/ping")
        assert statuses == [200, 200, 200]
        assert status == 429 and body["code"] == -1003
        assert headers["Retry-After"] == "48"  # seconds left in the sim minute, rounded up
        for _ in range(2):  # a client that keeps going...
            status, _, _ = await get_json(http, srv.url + "/fapi/v1/ping")
            assert status == 429
        status, body, headers = await get_json(http, srv.url + "/fapi/v1/ping")
        assert status == 418 and "banned until" in body["msg"]  # ...is banned
        assert headers["Retry-After"] == "120"
        await clock.advance(60)  # a new minute does not lift a ban
        status, _, headers = await get_json(http, srv.url + "/fapi/v1/ping")
        assert status == 418 and headers["Retry-After"] == "60"
        await clock.advance(60)
        status, _, _ = await get_json(http, srv.url + "/fapi/v1/ping")
        assert status == 200
        assert (srv.limiter.rate_limited, srv.limiter.banned) == (3, 2)


def test_repeat_offenders_are_banned_longer() -> None:
    limiter = WeightLimiter(1, requests_after_429_before_ban=0)
    now = 0
    bans = []
    for _ in range(3):
        assert limiter.admit("ip", 1, now).status is None
        assert limiter.admit("ip", 1, now).status == 429
        verdict = limiter.admit("ip", 1, now)
        assert verdict.status == 418
        bans.append(verdict.retry_after_secs)
        now = verdict.banned_until_ms + MINUTE_MS
    assert bans == [120, 240, 480]


@given(
    weights=st.lists(st.integers(1, 10), min_size=1, max_size=60),
    limit=st.integers(1, 50),
)
def test_a_client_within_budget_is_never_refused(weights: list[int], limit: int) -> None:
    limiter = WeightLimiter(limit)
    used = 0
    for weight in weights:
        verdict = limiter.admit("ip", weight, 5_000)
        if used + weight <= limit:
            assert verdict.status is None
            used += weight
            assert verdict.used_weight == used
        else:
            assert verdict.status in (429, 418)
            break


async def test_injected_faults_hit_only_their_path_and_are_counted(
    http: aiohttp.ClientSession,
) -> None:
    async with running_server(VirtualClock(NOW_MS)) as srv:
        srv.faults.fail_next(500, count=2, path=KLINES)
        status, _, _ = await get_json(http, srv.url + "/fapi/v1/ping")
        assert status == 200  # another path is untouched
        for _ in range(2):
            status, body, _ = await get_json(
                http, srv.url + KLINES, symbol="BTCUSDT", interval="1h"
            )
            assert (status, body["code"]) == (500, -1001)
        status, _, _ = await get_json(http, srv.url + KLINES, symbol="BTCUSDT", interval="1h")
        assert status == 200
        srv.faults.fail_next(429, retry_after_secs=7)
        srv.faults.fail_next(418, retry_after_secs=9)
        srv.faults.fail_next(503)
        status, _, headers = await get_json(http, srv.url + "/fapi/v1/time")
        assert (status, headers["Retry-After"]) == (429, "7")
        status, _, headers = await get_json(http, srv.url + "/fapi/v1/time")
        assert (status, headers["Retry-After"]) == (418, "9")
        status, body, _ = await get_json(http, srv.url + "/fapi/v1/time")
        assert (status, body["code"]) == (503, -1008)
        srv.faults.fail_next(502)
        async with http.get(srv.url + "/fapi/v1/time") as response:
            assert response.status == 502
            assert "Bad Gateway" in await response.text()
        assert srv.faults.injected == {"500": 2, "429": 1, "418": 1, "503": 1, "502": 1}
        assert srv.faults.pending == 0
        assert srv.requests[KLINES] == 3


async def test_a_delayed_request_is_answered_normally(http: aiohttp.ClientSession) -> None:
    async with running_server(VirtualClock(NOW_MS)) as srv:
        srv.faults.delay_next(0.05, path="/fapi/v1/time")
        status, body, _ = await get_json(http, srv.url + "/fapi/v1/time")
        assert (status, body) == (200, {"serverTime": NOW_MS})
        assert srv.faults.injected == {"delay": 1}


def test_faults_refuse_what_they_cannot_inject() -> None:
    faults = RestFaults()
    with pytest.raises(ValueError, match="status"):
        faults.fail_next(404)
    with pytest.raises(ValueError, match="count"):
        faults.fail_next(500, count=0)
    with pytest.raises(ValueError, match="delay"):
        faults.delay_next(0)


@pytest.mark.parametrize(
    "path",
    [
        "/fapi/v1/openInterest",
        "/futures/data/openInterestHist",
        "/futures/data/topLongShortAccountRatio",
        "/futures/data/topLongShortPositionRatio",
        "/futures/data/globalLongShortAccountRatio",
        "/futures/data/takerlongshortRatio",
        "/futures/data/basis",
    ],
)
async def test_unrecorded_series_answer_not_available(
    http: aiohttp.ClientSession, path: str
) -> None:
    async with running_server(VirtualClock(NOW_MS)) as srv:
        status, body, headers = await get_json(http, srv.url + path, symbol="BTCUSDT", period="5m")
        assert status == 404
        assert body["code"] == -1020
        assert "not available in the recorded data" in body["msg"]
        assert headers["X-MBX-USED-WEIGHT-1M"] == "1"
        status, body, _ = await get_json(http, srv.url + path, symbol="NOPEUSDT", period="5m")
        assert (status, body["code"]) == (400, -1121)


async def test_fear_greed_has_alternative_me_shape(http: aiohttp.ClientSession) -> None:
    recorded = load_fear_greed()
    day = utc_ms(2025, 5, 14) // 1000
    async with running_server(VirtualClock(NOW_MS)) as srv:
        status, body, _ = await get_json(http, srv.url + "/fng/")
        assert status == 200
        assert body["name"] == "Fear and Greed Index"
        assert body["metadata"] == {"error": None}
        (latest,) = body["data"]
        assert latest == {
            "value": str(recorded.loc[day, "value"]),
            "value_classification": recorded.loc[day, "classification"],
            "timestamp": str(day),
            "time_until_update": str(day + 86_400 - NOW_MS // 1000),
        }
        _, body, _ = await get_json(http, srv.url + "/fng/", limit=3, date_format="world")
        assert [d["timestamp"] for d in body["data"]] == ["14-05-2025", "13-05-2025", "12-05-2025"]
        assert "time_until_update" not in body["data"][1]
        _, body, _ = await get_json(http, srv.url + "/fng/", limit=0, date_format="us")
        assert len(body["data"]) == int((recorded.index <= day).sum())
        assert body["data"][-1]["timestamp"] == "02-01-2018"


async def test_fear_greed_after_the_recording_answers_the_error_shape(
    http: aiohttp.ClientSession,
) -> None:
    async with running_server(VirtualClock(utc_ms(2025, 6, 27, 0, 0))) as srv:
        status, body, _ = await get_json(http, srv.url + "/fng/", limit=1)
        assert status == 200
        assert body["data"] == []
        assert "2025-06-26" in body["metadata"]["error"]
    async with running_server(VirtualClock(utc_ms(2025, 6, 26, 23, 59))) as srv:
        _, body, _ = await get_json(http, srv.url + "/fng/")
        assert body["data"][0]["value"] == "74"  # the last recorded day is still current


@pytest.mark.parametrize("limit", ["²", "9" * 5000])
async def test_a_fear_greed_limit_int_cannot_read_answers_the_error_shape(
    http: aiohttp.ClientSession, limit: str
) -> None:
    """A Unicode digit (str.isdigit takes it, int does not) or 5,000 digits (past int()'s limit)
    was a ValueError in the handler: HTTP 500 and a traceback in the simulator's log."""
    async with running_server(VirtualClock(NOW_MS)) as srv:
        status, body, _ = await get_json(http, srv.url + "/fng/", limit=limit)
    assert status == 200
    assert body["data"] == [] and "limit" in body["metadata"]["error"]
