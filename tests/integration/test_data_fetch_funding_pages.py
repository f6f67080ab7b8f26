"""``vigil data fetch``'s funding pages from a server that does not page from the requested start
(a real proxy on loopback in front of the simulator's REST, answering the funding endpoint itself):
a full page repeating the requested start or a millisecond apart moved ``since`` 1 ms (or 1 s) a
page: a day's span was 86 million requests, each storing the echoed rows. Now such a page ends the
series, and rows closer than funding ever settles are dropped as garbled. (A full page ending at
the requested start is cut to its one row by ccxt already: kept as a case.)"""

from __future__ import annotations

import io
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
import pytest
from aiohttp import web
from test_sim_rest_support import running_server, utc_ms

from core.scaled_clock import ScaledClock
from market.recorded import load_funding
from runner.data.command import fetch_into
from runner.data.fetch import FUNDING_MIN_GAP_MS, FetchRequest

FUNDING = "/fapi/v1/fundingRate"
FIRST_MS = utc_ms(2025, 3, 1)
END_MS = utc_ms(2025, 3, 11)  # 30 settlements: one honest page
#: requests the proxy answers before it gives an empty page (the old code's loop ends there)
CAP = 200
Page = Callable[[int, int], list[int]]


def ending_at_start(start: int, limit: int) -> list[int]:
    return [start - (limit - 1 - i) * 8 * 3_600_000 for i in range(limit)]


def repeating_start(start: int, limit: int) -> list[int]:
    return [start] * limit


def a_ms_apart(start: int, limit: int) -> list[int]:
    return [start + i for i in range(limit)]


@asynccontextmanager
async def echoing_proxy(upstream: str, page: Page) -> AsyncIterator[tuple[str, list[int]]]:
    """Its URL, forwarding every request to ``upstream`` but the funding endpoint's, which it
    answers with ``page(startTime, limit)`` settlement times (CAP times, then an empty page);
    and the startTimes asked of it."""
    asked: list[int] = []

    async def handle(request: web.Request) -> web.Response:
        if request.path == FUNDING:
            asked.append(start := int(request.query["startTime"]))
            times = page(start, int(request.query["limit"])) if len(asked) <= CAP else []
            rows = [
                {"symbol": "BTCUSDT", "fundingTime": t, "fundingRate": "0.00010000"} for t in times
            ]
            return web.json_response(rows)
        async with session.get(upstream + request.path_qs) as answer:
            body = await answer.read()
            return web.Response(body=body, status=answer.status, content_type="application/json")

    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    async with aiohttp.ClientSession() as session:
        await site.start()
        try:
            host, port = runner.addresses[0][:2]
            yield f"http://{host}:{port}", asked
        finally:
            await runner.cleanup()


@pytest.mark.parametrize("page", [ending_at_start, repeating_start, a_ms_apart])
async def test_a_server_not_paging_from_the_start_ends_the_funding_series(
    tmp_path: Path, page: Page
) -> None:
    clock = ScaledClock(END_MS + 3_600_000, speed=600.0)
    out = tmp_path / "data"
    request = FetchRequest(("BTC/USDT",), "1h", FIRST_MS, END_MS, out)
    async with running_server(clock) as server, echoing_proxy(server.url, page) as (url, asked):
        _, funding = await fetch_into(request, url, clock, io.StringIO())
    assert len(asked) <= 2, f"{len(asked)} funding requests"
    stored = load_funding("BTC/USDT", out).index.to_numpy()
    assert (np.diff(stored) >= FUNDING_MIN_GAP_MS).all()
    assert funding.rows == len(stored)


def a_rate_past_the_bound(body: Any) -> Any:
    items = [dict(item) for item in body]
    items[2]["fundingRate"] = "0.5"
    items[3]["fundingRate"] = "-0.10000001"
    return items


async def test_a_rate_replay_would_refuse_is_dropped_not_stored(tmp_path: Path) -> None:
    clock = ScaledClock(END_MS + 3_600_000, speed=600.0)
    out = tmp_path / "data"
    request = FetchRequest(("BTC/USDT",), "1h", FIRST_MS, END_MS, out)
    async with running_server(clock) as server:
        server.faults.rewrite_next(a_rate_past_the_bound, path=FUNDING)
        _, funding = await fetch_into(request, server.url, clock, io.StringIO())
    recorded = load_funding("BTC/USDT").loc[FIRST_MS : END_MS - 1]
    stored = load_funding("BTC/USDT", out)  # it loads: nothing replay refuses was stored
    assert list(stored.index) == [t for i, t in enumerate(recorded.index) if i not in (2, 3)]
    assert (funding.rows, funding.dropped) == (len(recorded) - 2, 2)


def a_repeated_time(body: Any) -> Any:
    items = [dict(item) for item in body]
    items[5]["fundingTime"] = items[4]["fundingTime"]
    return items


async def test_a_full_page_with_one_repeat_goes_on_to_the_end(tmp_path: Path) -> None:
    first, end = utc_ms(2025, 1, 1), utc_ms(2026, 1, 1)  # 1,095 settlements: two pages
    clock = ScaledClock(end + 3_600_000, speed=3600.0)
    out = tmp_path / "data"
    request = FetchRequest(("BTC/USDT",), "4h", first, end, out)
    async with running_server(clock) as server:
        server.faults.rewrite_next(a_repeated_time, path=FUNDING)
        _, funding = await fetch_into(request, server.url, clock, io.StringIO())
    recorded = load_funding("BTC/USDT").loc[first : end - 1]
    assert len(recorded) > 1000
    stored = load_funding("BTC/USDT", out)
    assert list(stored.index) == [t for i, t in enumerate(recorded.index) if i != 5]
    assert (funding.rows, funding.dropped) == (len(recorded) - 1, 1)


def a_settlement_a_minute_after_the_stored_one(stored_ms: int) -> Callable[[Any], Any]:
    def rewrite(body: Any) -> Any:
        items = [dict(item) for item in body]
        items[0]["fundingTime"] = stored_ms + 60_000
        return items

    return rewrite


async def test_a_resumed_fetch_checks_its_first_row_against_the_last_stored_one(
    tmp_path: Path,
) -> None:
    """A killed fetch left its first settlements in the partial file; the resumed fetch's first
    row a minute after the last of them was kept (the 30-minute rule looked only at the rows of
    this run), where a fresh fetch drops and counts it."""
    clock = ScaledClock(END_MS + 3_600_000, speed=600.0)
    out = tmp_path / "data"
    recorded = load_funding("BTC/USDT").loc[FIRST_MS : END_MS - 1]
    kept = recorded.iloc[:5]
    partial = out / ".partial" / "BTCUSDT-funding.csv"
    partial.parent.mkdir(parents=True)
    partial.write_text(
        "funding_time_ms,funding_rate\n"
        + "".join(f"{t},{r!r}\n" for t, r in zip(kept.index, kept["funding_rate"], strict=True))
    )
    request = FetchRequest(("BTC/USDT",), "1h", FIRST_MS, END_MS, out)
    last_stored = int(kept.index[-1])
    async with running_server(clock) as server:
        server.faults.rewrite_next(
            a_settlement_a_minute_after_the_stored_one(last_stored), path=FUNDING
        )
        _, funding = await fetch_into(request, server.url, clock, io.StringIO())
    stored = load_funding("BTC/USDT", out).index.to_numpy()
    assert (np.diff(stored) >= FUNDING_MIN_GAP_MS).all()
    assert last_stored + 60_000 not in stored
    assert list(stored) == [t for i, t in enumerate(recorded.index) if i != 5]
    assert funding.dropped == 1
