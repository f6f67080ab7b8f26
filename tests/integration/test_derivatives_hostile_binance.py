"""Hostile Binance derivatives answers on loopback (through ccxt's binanceusdm): a row whose time
or number cannot be true is a reason, never a value in the snapshot."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from fakes.context_bodies import premium_index
from fakes.context_servers import (
    ContextServers,
)
from fakes.hostile_context import (
    BINANCE,
    EPOCH_MS,
    TICKERS,
    read_binance,
)

from core.clock import VirtualClock
from derivatives.config import DerivativesConfig
from derivatives.sources import build_context_fields
from market.ccxt_client import make_binanceusdm


@pytest.fixture
async def servers() -> AsyncIterator[ContextServers]:
    async with ContextServers() as servers:
        yield servers


@pytest.mark.parametrize(
    "time",
    [
        "1" + "0" * 30,  # past 64 bits: the snapshot's JSON could not be written
        "-1",
        "1597370495",  # seconds
        "1597370495002000",  # microseconds
    ],
)
@pytest.mark.parametrize("what", sorted(BINANCE))
async def test_a_binance_row_time_that_is_no_time_is_a_reason(
    servers: ContextServers, what: str, time: str
) -> None:
    path, fetch, rows, field = BINANCE[what]
    servers.answers[path] = [{**row, field: time} for row in rows()]
    got = await read_binance(servers, fetch)
    assert got.value is None and got.reason is not None
    assert what in got.reason and "malformed" in got.reason, got.reason


HUGE = "1" + "0" * 300  # a finite float (1e300) written as Binance writes decimals

#: (endpoint, field, value): a number of the right type that no market answers with
ABSURD = [
    ("premiumIndex", "lastFundingRate", HUGE),  # a funding of 1e302 % per 8 h
    ("premiumIndex", "lastFundingRate", "-3.5"),
    ("premiumIndex", "markPrice", "0"),
    ("premiumIndex", "markPrice", "-11793.6"),
    ("openInterestHist", "sumOpenInterestValue", "-150570784.07"),
    ("openInterestHist", "sumOpenInterestValue", HUGE),
    ("openInterestHist", "sumOpenInterest", "-20403.637"),
    ("takerlongshortRatio", "buyVol", "-387.33"),
    ("takerlongshortRatio", "sellVol", HUGE),  # the 1 h volume delta overflowed to -inf
    ("takerlongshortRatio", "buySellRatio", "-1.5"),
    ("topLongShortAccountRatio", "longShortRatio", "-1.8"),
    ("topLongShortAccountRatio", "longShortRatio", HUGE),  # the z-score's sum overflowed
    ("topLongShortAccountRatio", "longAccount", "1.7"),
    ("basis", "futuresPrice", "0"),
    ("basis", "indexPrice", "-29269.9"),
    ("basis", "basisRate", HUGE),
    ("basis", "annualizedBasisRate", HUGE),
]


@pytest.mark.parametrize(("what", "field", "value"), ABSURD)
async def test_an_absurd_binance_number_is_a_reason_not_a_value(
    servers: ContextServers, what: str, field: str, value: str
) -> None:
    path, fetch, rows, _ = BINANCE[what]
    servers.answers[path] = [{**row, field: value} for row in rows()]
    got = await read_binance(servers, fetch)
    assert got.value is None and got.reason is not None
    assert what in got.reason and "malformed" in got.reason and field in got.reason, got.reason


async def test_a_blank_rate_is_still_absent_not_refused(servers: ContextServers) -> None:
    """Binance's "" for a rate that does not apply (a perpetual's annualised basis)."""
    path, fetch, rows, _ = BINANCE["basis"]
    servers.answers[path] = [{**row, "annualizedBasisRate": ""} for row in rows()]
    got = await read_binance(servers, fetch)
    assert got.reason is None and got.value is not None
    assert got.value["BTC/USDT"]["annualized_basis_rate"] is None


async def test_open_interest_rows_newest_first_are_read_by_their_time(
    servers: ContextServers,
) -> None:
    """The 24 h change was last row against first as sent: rows newest first flipped its sign."""
    path, fetch, rows, _ = BINANCE["openInterestHist"]
    servers.answers[path] = rows()[::-1]
    got = await read_binance(servers, fetch)
    assert got.value is not None
    btc = got.value["BTC/USDT"]
    assert (btc["contracts"], btc["at_ms"]) == (20401.367, 1583128200000)
    assert btc["change_24h_pct"] == pytest.approx(
        (149940752.14464448 / 150570784.07809979 - 1) * 100
    )


@pytest.mark.parametrize("first", ["0." + "0" * 320 + "1", "0.0001"])
async def test_an_open_interest_change_no_market_makes_is_a_reason(
    servers: ContextServers, first: str
) -> None:
    """US$ 1e-321 a day before US$ 1e12: the change was infinite, and the gate's metric too."""
    path, fetch, rows, _ = BINANCE["openInterestHist"]
    answer = rows()
    answer[0]["sumOpenInterestValue"], answer[1]["sumOpenInterestValue"] = first, "1000000000000"
    servers.answers[path] = answer
    got = await read_binance(servers, fetch)
    assert got.value is None and got.reason is not None
    assert "openInterestHist" in got.reason and "malformed" in got.reason, got.reason


FIELD_OF = {
    "premiumIndex": "funding_rates",
    "openInterestHist": "open_interest",
    "takerlongshortRatio": "taker_delta",
    "topLongShortAccountRatio": "long_short_ratio",
    "basis": "basis",
}


@pytest.mark.parametrize("what", sorted(BINANCE))
async def test_a_binance_row_from_the_future_is_a_reason(
    servers: ContextServers, what: str
) -> None:
    """A row a day ahead of the daemon's clock was taken as the latest (its time the at_ms), read
    through the fields the daemon builds."""
    path, _, rows, field = BINANCE[what]
    servers.answers[path] = [{**row, field: str(EPOCH_MS + 86_400_000)} for row in rows()]
    exchange = make_binanceusdm(servers.url, timeout_ms=5_000)
    exchange.timeout_on_exit = 0
    try:
        fields = build_context_fields(
            DerivativesConfig(), VirtualClock(EPOCH_MS), TICKERS, exchange
        )
        (source,) = [f.source for f in fields if f.field == FIELD_OF[what]]
        got = await source.read()
    finally:
        await exchange.close()
    assert got.value is None and got.reason is not None
    assert what in got.reason and "ahead" in got.reason, got.reason


async def test_another_symbols_broken_row_leaves_the_funding_rates_alone(
    servers: ContextServers,
) -> None:
    """premiumIndex lists every contract: one odd row of a symbol not traded (a mark price of 0)
    made the funding of the traded ones unavailable."""
    path, fetch, rows, _ = BINANCE["premiumIndex"]
    odd = {**premium_index("XYZUSDT"), "markPrice": "0", "lastFundingRate": "NaN"}
    servers.answers[path] = [*rows(), odd]
    got = await read_binance(servers, fetch)
    assert (got.value, got.reason) == ({"BTC/USDT": 0.00038246}, None)
