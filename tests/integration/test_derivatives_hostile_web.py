"""Hostile web-source answers on loopback (Farside, DeFiLlama, alternative.me): a figure, supply or
date that cannot be true, or a body too large, is a reason, never a value in the snapshot."""

from __future__ import annotations

from collections.abc import AsyncIterator

import orjson
import pytest
from fakes.context_bodies import (
    fear_greed,
    stablecoins,
)
from fakes.context_servers import (
    FARSIDE,
    FNG,
    STABLECOINS,
    ContextServers,
)
from fakes.etf_page import farside_page
from fakes.hostile_context import (
    EPOCH_MS,
    TICKERS,
    cached,
)

from core.clock import VirtualClock
from derivatives.config import DerivativesConfig
from derivatives.etf_flow import fetch_etf_flow
from derivatives.http import MAX_BODY_BYTES
from derivatives.sources import build_context_fields
from derivatives.web_sources import fetch_fear_greed, fetch_stablecoin_supply


@pytest.fixture
async def servers() -> AsyncIterator[ContextServers]:
    async with ContextServers() as servers:
        yield servers


@pytest.mark.parametrize("figure", ["NaN", "inf", "(Infinity)", "1e400", "1e300", "(2e9)"])
@pytest.mark.parametrize("cell", ["total", "fund"])
async def test_an_etf_flow_figure_that_is_no_flow_is_a_reason(
    servers: ContextServers, cell: str, figure: str
) -> None:
    """The latest day's total (94.3) or ARKB's flow that day (94.3 too) replaced."""
    page = farside_page()
    day = page.index("28 Feb 2025")
    cells = page[day:].split("94.3")
    at = 1 if cell == "total" else 0  # ARKB comes before the total in the row
    servers.answers[FARSIDE] = (
        page[:day] + "94.3".join(cells[: at + 1]) + figure + "94.3".join(cells[at + 1 :])
    )
    got = await cached(lambda: fetch_etf_flow(servers.url + FARSIDE, EPOCH_MS)).read()
    assert got.value is None and got.reason is not None
    assert "Farside" in got.reason and "malformed" in got.reason and figure in got.reason


@pytest.mark.parametrize("usdt", [1e308, -150e9, 0.0])
async def test_a_stablecoin_supply_that_is_no_supply_is_a_reason(
    servers: ContextServers, usdt: float
) -> None:
    """1e308 of each coin summed to an infinite total; a negative one was a negative supply."""
    body = stablecoins()
    for asset in body["peggedAssets"][:2]:  # USDT and USDC
        asset["circulating"] = {"peggedUSD": usdt}
    servers.answers[STABLECOINS] = body
    got = await cached(lambda: fetch_stablecoin_supply(servers.url)).read()
    assert got.value is None and got.reason is not None
    assert "DeFiLlama" in got.reason and "malformed" in got.reason, got.reason


@pytest.mark.parametrize("before", [1e308, 1e-300])
async def test_a_past_supply_that_is_no_supply_leaves_the_change_out(
    servers: ContextServers, before: float
) -> None:
    """1e308 a day before summed to infinity: the day's change was served as -100 %; 1e-300
    made it infinite."""
    body = stablecoins()
    for asset in body["peggedAssets"][:2]:
        asset["circulatingPrevDay"] = {"peggedUSD": before}
    servers.answers[STABLECOINS] = body
    got = await cached(lambda: fetch_stablecoin_supply(servers.url)).read()
    assert got.value is not None and "change_1d_pct" not in got.value
    assert got.value["total_usd"] == 210e9 and "change_7d_pct" in got.value


@pytest.mark.parametrize("stamp", ["1" + "0" * 30, "-1", "1551157200000"])  # 64 bits, <0, in ms
async def test_a_fear_greed_time_that_is_no_time_is_a_reason(
    servers: ContextServers, stamp: str
) -> None:
    body = fear_greed()
    body["data"][0]["timestamp"] = stamp
    servers.answers[FNG] = body
    got = await cached(lambda: fetch_fear_greed(servers.url)).read()
    assert got.value is None and got.reason is not None
    assert "Fear & Greed" in got.reason and "malformed" in got.reason, got.reason


async def test_a_fear_greed_day_from_the_future_is_a_reason(servers: ContextServers) -> None:
    """An index dated a day ahead of the daemon's clock was served as today's."""
    body = fear_greed()
    body["data"][0]["timestamp"] = str(EPOCH_MS // 1000 + 86_400)
    servers.answers[FNG] = body
    config = DerivativesConfig(fng_base_url=servers.url)
    fields = build_context_fields(config, VirtualClock(EPOCH_MS), TICKERS, exchange=None)
    (source,) = [f.source for f in fields if f.field == "fear_greed"]
    got = await source.read()
    assert got.value is None and got.reason is not None
    assert "Fear & Greed" in got.reason and "ahead" in got.reason, got.reason


async def test_a_huge_body_is_a_reason_not_read_whole(servers: ContextServers) -> None:
    """A 200 of valid JSON over the cap: it was read into memory whole, however large."""
    padding = b"x" * MAX_BODY_BYTES
    servers.answers[FNG] = b'{"pad": "' + padding + b'", ' + orjson.dumps(fear_greed())[1:]
    got = await cached(lambda: fetch_fear_greed(servers.url)).read()
    assert got.value is None and got.reason is not None
    assert "Fear & Greed" in got.reason and "over" in got.reason, got.reason
