"""FredSource against a fake FRED on loopback (aiohttp) that answers in FRED's JSON shape.

The observation values the fake serves are TEST FIXTURES written here (plausible magnitudes for
INDPRO and CPIAUCSL, built to land in a chosen quadrant), not real FRED data.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import AsyncIterator
from datetime import date
from typing import Any

import orjson
import pandas as pd
import pytest
from aiohttp import web
from pydantic import SecretStr

from core.clock import VirtualClock
from regime.fred import FredSource
from regime.macro import MacroQuadrant

API_KEY = "abcdef0123456789abcdef0123456789"  # FRED keys are 32 lower-case alphanumerics
NOW_MS = int(pd.Timestamp("2025-03-20", tz="UTC").timestamp() * 1000)
DAY_SECS = 86_400.0


def fixture_observations() -> dict[str, list[tuple[str, str]]]:
    """TEST FIXTURE: monthly levels 2020-01 .. 2025-01. INDPRO accelerates over the last 4 months
    (growth rising), CPIAUCSL slows down (inflation falling): a GOLDILOCKS reading."""
    months = pd.date_range("2020-01-01", "2025-01-01", freq="MS")
    indpro, cpi = [100.0], [258.0]
    for i in range(1, len(months)):
        recent = i >= len(months) - 4
        indpro.append(indpro[-1] * (1.004 if recent else 1.001))
        cpi.append(cpi[-1] * (1.0005 if recent else 1.003))
    return {
        "INDPRO": [(f"{m:%Y-%m-%d}", f"{v:.4f}") for m, v in zip(months, indpro, strict=True)],
        "CPIAUCSL": [(f"{m:%Y-%m-%d}", f"{v:.3f}") for m, v in zip(months, cpi, strict=True)],
    }


class FakeFred:
    """``GET /fred/series/observations`` like api.stlouisfed.org, plus switchable failures."""

    def __init__(self) -> None:
        self.observations = fixture_observations()
        self.mode = "ok"
        self.requests: list[dict[str, str]] = []
        self.release = asyncio.Event()  # "hang" mode waits on it
        self.url = ""
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/fred/series/observations", self.observations_handler)
        self._runner = web.AppRunner(app, access_log=None)  # its access log would show the key
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        self.url = f"http://{host}:{port}"

    async def stop(self) -> None:
        self.release.set()
        if self._runner is not None:
            await self._runner.cleanup()

    async def observations_handler(self, request: web.Request) -> web.StreamResponse:
        query = dict(request.query)
        self.requests.append(query)
        if self.mode == "hang":
            await self.release.wait()
        if self.mode == "bad_key":
            return fred_error(
                400,
                "Bad Request.  The value for variable api_key is not registered.  Read "
                "https://fred.stlouisfed.org/docs/api/api_key.html for more information.",
            )
        if self.mode == "server_error":
            return web.Response(status=500, text="<html>Internal Server Error</html>")
        if self.mode == "not_json":
            return web.Response(status=200, text="<html>maintenance</html>")
        if self.mode == "wrong_shape":
            return web.json_response({"observations": [{"date": "2024-01-01"}]})
        if self.mode == "bad_value":
            return observations_body(query, [("2024-01-01", "n/a")])
        rows = self.observations.get(query.get("series_id", ""))
        if rows is None:
            return fred_error(400, "Bad Request.  The series does not exist.")
        start = query.get("observation_start", "1776-07-04")
        return observations_body(query, [row for row in rows if row[0] >= start])


def fred_error(status: int, message: str) -> web.Response:
    return web.json_response({"error_code": status, "error_message": message}, status=status)


def observations_body(query: dict[str, str], rows: list[tuple[str, str]]) -> web.Response:
    body: dict[str, Any] = {
        "realtime_start": "2025-03-20",
        "realtime_end": "2025-03-20",
        "observation_start": query.get("observation_start", "1776-07-04"),
        "observation_end": "9999-12-31",
        "units": "lin",
        "output_type": 1,
        "file_type": "json",
        "order_by": "observation_date",
        "sort_order": "asc",
        "count": len(rows),
        "offset": 0,
        "limit": 100000,
        "observations": [
            {"realtime_start": "2025-03-20", "realtime_end": "2025-03-20", "date": d, "value": v}
            for d, v in rows
        ],
    }
    return web.Response(body=orjson.dumps(body), content_type="application/json")


@pytest.fixture
async def fred() -> AsyncIterator[FakeFred]:
    server = FakeFred()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


def source(fred: FakeFred, clock: VirtualClock, **kwargs: Any) -> FredSource:
    kwargs.setdefault("api_key", SecretStr(API_KEY))
    return FredSource(clock, base_url=fred.url, timeout_secs=5.0, **kwargs)


async def test_classifies_from_the_two_series(fred: FakeFred) -> None:
    regime = await source(fred, VirtualClock(epoch_ms=NOW_MS)).current()
    assert regime.quadrant is MacroQuadrant.GOLDILOCKS and regime.exposure == 1.2
    assert regime.source == "fred" and regime.reason is None
    assert regime.as_of_ms == int(pd.Timestamp("2025-01-01", tz="UTC").timestamp() * 1000)
    assert regime.growth_yoy_pct is not None and regime.growth_trend_yoy_pct is not None
    assert regime.growth_yoy_pct > regime.growth_trend_yoy_pct
    assert [r["series_id"] for r in fred.requests] == ["INDPRO", "CPIAUCSL"]
    for query in fred.requests:
        assert query["api_key"] == API_KEY and query["file_type"] == "json"
        start = date.fromisoformat(query["observation_start"])
        assert start.day == 1 and date(2020, 1, 1) <= start <= date(2022, 3, 1)


async def test_answers_are_cached_for_a_day_of_clock_time(fred: FakeFred) -> None:
    clock = VirtualClock(epoch_ms=NOW_MS)
    fred_source = source(fred, clock)
    first = await fred_source.current()
    await clock.advance(DAY_SECS - 60)
    assert await fred_source.current() == first
    assert len(fred.requests) == 2
    await clock.advance(60)
    await fred_source.current()
    assert len(fred.requests) == 4


async def test_concurrent_callers_share_one_fetch(fred: FakeFred) -> None:
    fred_source = source(fred, VirtualClock(epoch_ms=NOW_MS))
    regimes = await asyncio.gather(*(fred_source.current() for _ in range(3)))
    assert len({r.quadrant for r in regimes}) == 1 and len(fred.requests) == 2


async def test_no_key_means_unavailable_without_a_request(fred: FakeFred) -> None:
    regime = await source(fred, VirtualClock(epoch_ms=NOW_MS), api_key=None).current()
    assert regime.quadrant is MacroQuadrant.UNAVAILABLE and regime.exposure == 1.0
    assert regime.reason == "no FRED API key configured"
    assert fred.requests == []


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("bad_key", "HTTP 400: Bad Request.  The value for variable api_key is not registered"),
        ("server_error", "HTTP 500: <html>Internal Server Error</html>"),
        ("not_json", "malformed FRED response for INDPRO"),
        ("wrong_shape", "malformed FRED response for INDPRO: observations.0.value"),
        ("bad_value", "value 'n/a' on 2024-01-01 is not a number"),
    ],
)
async def test_failures_are_unavailable_with_a_reason(
    fred: FakeFred, mode: str, expected: str, caplog: pytest.LogCaptureFixture
) -> None:
    fred.mode = mode
    with caplog.at_level(logging.DEBUG):
        regime = await source(fred, VirtualClock(epoch_ms=NOW_MS)).current()
    assert regime.quadrant is MacroQuadrant.UNAVAILABLE and regime.exposure == 1.0
    assert regime.reason is not None and expected in regime.reason
    assert regime.growth_yoy_pct is None and regime.inflation_yoy_pct is None
    assert API_KEY not in regime.reason
    assert all(API_KEY not in record.getMessage() for record in caplog.records)
    assert any("macro regime unavailable" in record.getMessage() for record in caplog.records)


async def test_a_timeout_is_unavailable(fred: FakeFred) -> None:
    fred.mode = "hang"
    regime = await FredSource(
        VirtualClock(epoch_ms=NOW_MS),
        api_key=SecretStr(API_KEY),
        base_url=fred.url,
        timeout_secs=0.2,
    ).current()
    assert regime.quadrant is MacroQuadrant.UNAVAILABLE
    assert regime.reason == "FRED INDPRO: no answer within 0.2 s"


async def test_an_unreachable_server_is_unavailable() -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    regime = await FredSource(
        VirtualClock(epoch_ms=NOW_MS),
        api_key=SecretStr(API_KEY),
        base_url=f"http://127.0.0.1:{port}",
    ).current()
    assert regime.quadrant is MacroQuadrant.UNAVAILABLE
    assert regime.reason is not None and regime.reason.startswith("FRED INDPRO: request failed")
    assert API_KEY not in regime.reason


async def test_a_failure_is_retried_after_an_hour_not_before(fred: FakeFred) -> None:
    clock = VirtualClock(epoch_ms=NOW_MS)
    fred_source = source(fred, clock)
    fred.mode = "server_error"
    assert (await fred_source.current()).quadrant is MacroQuadrant.UNAVAILABLE
    fred.mode = "ok"
    await clock.advance(3_000)
    assert (await fred_source.current()).quadrant is MacroQuadrant.UNAVAILABLE
    assert len(fred.requests) == 1  # INDPRO failed, CPIAUCSL never asked
    await clock.advance(600)
    assert (await fred_source.current()).quadrant is MacroQuadrant.GOLDILOCKS


async def test_missing_values_in_the_window_make_it_unavailable(fred: FakeFred) -> None:
    cpi = fred.observations["CPIAUCSL"]
    cpi[-4] = (cpi[-4][0], ".")  # 2024-10, FRED's marker for a missing observation
    regime = await source(fred, VirtualClock(epoch_ms=NOW_MS)).current()
    assert regime.quadrant is MacroQuadrant.UNAVAILABLE
    assert regime.reason is not None and regime.reason.startswith("CPIAUCSL: need 4 consecutive")


async def test_an_unknown_series_is_reported(fred: FakeFred) -> None:
    del fred.observations["CPIAUCSL"]
    regime = await source(fred, VirtualClock(epoch_ms=NOW_MS)).current()
    assert regime.reason == "FRED CPIAUCSL: HTTP 400: Bad Request.  The series does not exist."
