"""Replay's in-process adapters answer what real ccxt reads from the simulator's REST server.

One ``RestServer`` on loopback and the adapters share a SimFeed and a VirtualClock; at each instant
the same request goes both ways and the answers must be equal: klines (closed candles: the REST
endpoint also sends the candle in progress, which the adapter never does), premiumIndex, and the
Fear & Greed index (raw /fng/ payload and the parsed value).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from ccxt.base import errors as ccxt_errors
from test_sim_rest_support import get_json, running_server, shared_feed, sim_exchange, utc_ms

from core.clock import VirtualClock
from derivatives.cache import SourceNotAvailableError
from derivatives.config import DerivativesConfig
from derivatives.hedge import fetch_paxg
from derivatives.web_sources import fear_greed_from_payload, fetch_fear_greed
from market.recorded import load_fear_greed
from market.timeframes import TIMEFRAME_MS, candle_open_ms
from sim.inprocess import RecordedOhlcvExchange, RecordedPremiumIndex
from sim.recorded_sources import FNG_WHAT, build_recorded_context_fields
from sim.recorded_spot import RecordedSpotKlines
from sim.rest_payloads import FearGreedBook

START_MS = utc_ms(2025, 3, 1, 12, 34) + 4_321
INSTANTS_MS = (
    START_MS,  # mid-candle for every timeframe
    utc_ms(2025, 4, 2, 8, 0),  # on a 4h boundary: the previous candle closed 1 ms ago
    utc_ms(2025, 5, 20, 16, 5) - 1,  # a 5m candle's close time exactly
    utc_ms(2025, 6, 10, 9, 10) - 100,  # the last 250 ms of a 5m candle: shown closed on the stream
    utc_ms(2025, 12, 1, 3, 3),  # after the Fear & Greed recording ends
)
RECORDED_FROM_MS = utc_ms(
    2025, 1, 1
)  # a midnight inside the recording: aligned for every timeframe
TIMEFRAMES = ("5m", "15m", "1h", "4h")
SYMBOLS = ("BTC/USDT:USDT", "SOL/USDT:USDT")


@pytest.fixture
async def both() -> AsyncIterator[tuple[VirtualClock, Any, str]]:
    clock = VirtualClock(START_MS)
    # ccxt's own rate limiter would pace these requests in real seconds: not what is compared here
    async with (
        running_server(clock) as server,
        sim_exchange(server.url, enable_rate_limit=False) as exchange,
    ):
        exchange.timeout_on_exit = 0  # plain HTTP on loopback: no TLS shutdown to wait for
        yield clock, exchange, server.url


async def instants(clock: VirtualClock) -> AsyncIterator[int]:
    for at_ms in INSTANTS_MS:
        await clock.advance((at_ms - clock.now_ms()) / 1000)
        assert clock.now_ms() == at_ms
        yield at_ms


async def test_ohlcv_equals_ccxt_against_the_sim(both: tuple[VirtualClock, Any, str]) -> None:
    clock, exchange, _ = both
    recorded = RecordedOhlcvExchange(shared_feed(), clock)
    compared = 0
    async for now_ms in instants(clock):
        for symbol in SYMBOLS:
            for timeframe in TIMEFRAMES:
                tf_ms = TIMEFRAME_MS[timeframe]
                # what OhlcvHistory asks: since .. the last closed candle's open, as "until"
                last_closed = candle_open_ms(now_ms, timeframe) - tf_ms
                since = max(last_closed - 900 * tf_ms, RECORDED_FROM_MS)  # one ccxt page
                for limit in (None, 7):  # None: 1000 (ccxt, since + until)
                    args = (symbol, timeframe, since, limit, {"until": last_closed})
                    ours = await recorded.fetch_ohlcv(*args)
                    assert ours == await exchange.fetch_ohlcv(*args), (now_ms, args)
                    newest = since + 6 * tf_ms if limit == 7 else last_closed
                    assert ours[-1][0] == newest
                    compared += 1
                # no since: ccxt's answer ends with the candle in progress, ours stops before it
                theirs = await exchange.fetch_ohlcv(symbol, timeframe)
                closed = [r for r in theirs if r[0] + tf_ms - 1 <= now_ms]
                ours = await recorded.fetch_ohlcv(symbol, timeframe)
                # one candle more when the partial one took a slot of ccxt's 500
                assert len(ours) <= 500 and len(ours) - len(closed) in (0, 1)
                assert ours[-len(closed) :] == closed, (now_ms, symbol, timeframe)
    assert compared == len(INSTANTS_MS) * len(SYMBOLS) * len(TIMEFRAMES) * 2


async def test_ohlcv_errors_are_the_ones_ccxt_raises(both: tuple[VirtualClock, Any, str]) -> None:
    clock, exchange, _ = both
    recorded = RecordedOhlcvExchange(shared_feed(), clock)
    # "BTC/USDT" (spot-style) is not a market of binanceusdm in ccxt either
    for args in (("DOGE/USDT:USDT", "5m"), ("BTC/USDT", "5m"), ("BTC/USDT:USDT", "2h")):
        with pytest.raises(ccxt_errors.BaseError) as theirs:
            await exchange.fetch_ohlcv(*args)
        with pytest.raises(ccxt_errors.BaseError) as ours:
            await recorded.fetch_ohlcv(*args)
        assert type(ours.value) is type(theirs.value), (args, theirs.value, ours.value)


async def test_premium_index_equals_the_sims(both: tuple[VirtualClock, Any, str]) -> None:
    clock, exchange, _ = both
    recorded = RecordedPremiumIndex(shared_feed(), clock)
    async for _ in instants(clock):
        for params in ({}, {"symbol": "ETHUSDT"}):
            assert await recorded.fapiPublicGetPremiumIndex(
                params
            ) == await exchange.fapiPublicGetPremiumIndex(params)
    for params in ({"symbol": "DOGEUSDT"},):
        with pytest.raises(ccxt_errors.BadSymbol):
            await exchange.fapiPublicGetPremiumIndex(params)
        with pytest.raises(ccxt_errors.BadSymbol):
            await recorded.fapiPublicGetPremiumIndex(params)


async def test_fear_greed_equals_the_sims(both: tuple[VirtualClock, Any, str]) -> None:
    clock, _, url = both
    book = FearGreedBook(load_fear_greed())
    fields = build_recorded_context_fields(
        DerivativesConfig(), clock, ("BTC/USDT",), shared_feed(), book, RecordedSpotKlines()
    )
    fear_greed = next(f.source for f in fields if f.field == "fear_greed")
    async with aiohttp.ClientSession() as http:
        async for now_ms in instants(clock):
            _, served, _ = await get_json(http, url + "/fng/", limit=1)
            assert served == book.answer({"limit": "1"}, now_ms // 1000)
            got = await fear_greed.read()
            try:
                live = await fetch_fear_greed(url)
            except SourceNotAvailableError as exc:  # the recording ended: same "no value" reason
                assert got.value is None and got.reason is not None
                assert got.reason.endswith(f"{FNG_WHAT}: {str(exc).split(': ', 1)[1]}")
                continue
            assert got.value == live == fear_greed_from_payload(served)
            assert live["timestamp_ms"] <= now_ms


async def test_paxg_equals_the_sims(both: tuple[VirtualClock, Any, str]) -> None:
    """Replay's hedge field and the live source asking the simulator's /api/v3/klines agree."""
    clock, _, url = both
    fields = build_recorded_context_fields(
        DerivativesConfig(),
        clock,
        ("BTC/USDT",),
        shared_feed(),
        FearGreedBook(load_fear_greed()),
        RecordedSpotKlines(),
    )
    paxg = next(f.source for f in fields if f.field == "paxg")
    async for now_ms in instants(clock):
        got = await paxg.read()
        live = await fetch_paxg(url, now_ms)
        assert got.value == live and live["price_at_ms"] < now_ms
        assert live["return_1h_pct"] is not None and live["return_4h_pct"] is not None
    async with aiohttp.ClientSession() as http:
        status, body, _ = await get_json(
            http, url + "/api/v3/klines", symbol="BTCUSDT", interval="1h"
        )
    assert (status, body["code"]) == (400, -1121)
