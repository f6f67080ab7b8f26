"""Real ccxt ``binanceusdm`` against the real sim REST server on loopback: no monkeypatching.

Sim time is a ScaledClock at high speed shared by the server and the client, so Retry-After and
backoff waits (sim seconds) take milliseconds of real time; expectations are taken from the
recorded files and bounded by the instant the client read before each request.
"""

from __future__ import annotations

import types
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import ccxt.async_support as ccxt_async
import numpy as np
import pandas as pd
import pytest
from fakes.virtual_time import drive
from test_sim_rest_support import (
    RecordingClock,
    running_server,
    sim_exchange,
    utc_ms,
)

from core.clock import VirtualClock
from core.events import Candle, CandleClosed
from core.scaled_clock import ScaledClock
from market.ccxt_client import (
    CcxtRequestRejectedError,
    CcxtRetryableError,
    RetryPolicy,
    call_with_retries,
)
from market.history import DAY_MS, CcxtCandleBackfill, OhlcvHistory
from market.recorded import load_funding, load_klines, resample
from market.timeframes import TIMEFRAME_MS, candle_open_ms
from sim.rest_server import RestServer

SIM_START_MS = utc_ms(2025, 9, 1, 13, 21)  # the 180-day window starts after the Jan 2025 quirks
FAST_RETRY = RetryPolicy(max_attempts=4, base_secs=0.5, cap_secs=30.0, jitter_fraction=0.5)
BTC = "BTC/USDT"


@pytest.fixture
def clock() -> RecordingClock:
    return RecordingClock(ScaledClock(SIM_START_MS, speed=600.0))


@pytest.fixture
async def server(clock: RecordingClock) -> AsyncIterator[RestServer]:
    async with running_server(clock.inner) as srv:
        yield srv


def recorded_4h(ticker: str) -> pd.DataFrame:
    return resample(load_klines(ticker, "1h"), "1h", "4h")


async def test_load_markets_and_ohlcv_contact_only_the_sim(server: RestServer) -> None:
    hosts: list[str] = []

    async def on_request_start(session: Any, ctx: Any, params: Any) -> None:
        hosts.append(f"{params.url.scheme}://{params.url.host}:{params.url.port}")

    trace = aiohttp.TraceConfig()
    trace.on_request_start.append(on_request_start)
    async with (
        sim_exchange(server.url) as exchange,
        aiohttp.ClientSession(trace_configs=[trace]) as session,
    ):
        exchange.session = session  # ccxt uses a session it is given: every request is traced
        assert all(url.startswith(server.url + "/") for url in exchange.urls["api"].values())
        markets = await exchange.load_markets()
        assert set(markets) == {"BTC/USDT:USDT", "ETH/USDT:USDT", "SOL/USDT:USDT"}
        btc = markets["BTC/USDT:USDT"]
        assert (btc["swap"], btc["linear"], btc["settle"]) == (True, True, "USDT")
        assert btc["precision"]["price"] == 0.1 and btc["limits"]["cost"]["min"] == 100
        candles = await exchange.fetch_ohlcv("BTC/USDT:USDT", "4h", limit=5)
        assert len(candles) == 5
        assert await exchange.fetch_time() >= SIM_START_MS
    assert hosts and set(hosts) == {server.url}


async def test_history_4h_180_days_equals_recorded_closed_candles(
    server: RestServer, clock: RecordingClock
) -> None:
    async with sim_exchange(server.url) as exchange:
        history = OhlcvHistory(exchange, clock, tickers=[BTC, "SOL/USDT"], retry=FAST_RETRY)
        before_ms = clock.now_ms()
        await history.refresh_all()
        after_ms = clock.now_ms()
    klines_requests = server.requests["/fapi/v1/klines"]
    assert klines_requests == 4  # 1080 candles per ticker: two pages of at most 1000
    for ticker in (BTC, "SOL/USDT"):
        got = history.frame(ticker)
        refreshed_ms = history.refreshed_at_ms(ticker)
        assert refreshed_ms is not None and before_ms <= refreshed_ms <= after_ms
        window_start = refreshed_ms - 180 * DAY_MS
        cutoff = candle_open_ms(refreshed_ms, "4h")  # the candle in progress then
        expected = recorded_4h(ticker)
        expected = expected[(expected.index >= window_start) & (expected.index < cutoff)]
        assert got.index.tolist() == expected.index.tolist()
        assert len(got) in (1079, 1080)
        assert (got.index + TIMEFRAME_MS["4h"] <= refreshed_ms).all()  # closed only
        pd.testing.assert_frame_equal(got[["open", "high", "low", "close"]],
                                      expected[["open", "high", "low", "close"]])  # fmt: skip
        np.testing.assert_allclose(got["volume"], expected["volume"], rtol=1e-12)
        assert got.dtypes.tolist() == [np.float64] * 5 and got.index.dtype == np.int64


async def test_candle_close_fetches_only_the_newest_candle() -> None:
    start = utc_ms(2025, 9, 1, 15, 59)
    clock = VirtualClock(start)  # sim time moves only when the test says so
    async with running_server(clock) as srv, sim_exchange(srv.url) as exchange:
        history = OhlcvHistory(exchange, clock, tickers=[BTC], days=30, retry=FAST_RETRY)
        await history.refresh(BTC)
        before = history.frame(BTC)
        assert before.index[-1] == utc_ms(2025, 9, 1, 8)
        requests_before = srv.requests["/fapi/v1/klines"]
        await clock.advance(120)  # 16:01: the 12:00 candle has closed
        closed = recorded_4h(BTC).loc[utc_ms(2025, 9, 1, 12)]
        o, h, low, c, v = closed.to_numpy(dtype=float).tolist()
        candle = Candle(
            open_time_ms=utc_ms(2025, 9, 1, 12), open=o, high=h, low=low, close=c, volume=v
        )
        await history.on_candle_closed(CandleClosed(ticker=BTC, timeframe="4h", candle=candle))
        await history.on_candle_closed(CandleClosed(ticker=BTC, timeframe="1h", candle=candle))
        after = history.frame(BTC)
    assert srv.requests["/fapi/v1/klines"] == requests_before + 1  # the 1h close is ignored
    assert after.index[-1] == utc_ms(2025, 9, 1, 12)
    pd.testing.assert_frame_equal(after.iloc[:-1], before[before.index >= after.index[0]])
    assert after.iloc[-1]["close"] == closed["close"]


async def test_backfill_pages_through_closed_candles(
    server: RestServer, clock: RecordingClock
) -> None:
    async with sim_exchange(server.url) as exchange:
        backfill = CcxtCandleBackfill(exchange, clock=clock, retry=FAST_RETRY)
        until = clock.now_ms() + 3 * DAY_MS  # the future is capped at now
        since = until - 15 * DAY_MS - 1  # 15m x 15 days > one ccxt page
        candles = await backfill.closed_candles(BTC, "15m", since, until)
        now_ms = clock.now_ms()
    expected = resample(load_klines(BTC, "5m"), "5m", "15m")
    expected = expected[
        (expected.index >= since) & (expected.index + TIMEFRAME_MS["15m"] <= now_ms)
    ]
    assert len(candles) > 1000
    assert [c.open_time_ms for c in candles] == expected.index.tolist()[: len(candles)]
    assert len(expected) - len(candles) <= 1  # a candle may close while the pages load
    assert candles[-1].open_time_ms + TIMEFRAME_MS["15m"] <= now_ms
    assert candles[0].close == expected["close"].iloc[0]


async def test_rate_limit_429_is_waited_out_and_the_refresh_succeeds() -> None:
    # sim time stands still except when the client sleeps, so the weight budget is exact: the
    # markets (1) and BTC's two pages (5 + 5) fill the 11 of this sim minute, ETH's first page is
    # refused with Retry-After 60 (the sim minute has just begun), waited out, then it all succeeds
    sim_clock = VirtualClock(SIM_START_MS)
    clock = RecordingClock(sim_clock)
    async with (
        running_server(sim_clock, weight_limit_1m=11) as srv,
        sim_exchange(srv.url, enable_rate_limit=False) as exchange,
    ):
        history = OhlcvHistory(exchange, clock, tickers=[BTC, "ETH/USDT"], retry=FAST_RETRY)
        await drive(sim_clock, history.refresh_all())
    assert (srv.limiter.rate_limited, srv.limiter.banned) == (1, 0)  # waited as told: no ban
    assert clock.sleeps == [60.0]
    assert len(history.frame(BTC)) == len(history.frame("ETH/USDT")) == 1079


async def test_injected_429_retry_after_sets_the_wait(
    server: RestServer, clock: RecordingClock
) -> None:
    server.faults.fail_next(429, path="/fapi/v1/klines", retry_after_secs=7)
    async with sim_exchange(server.url) as exchange:
        history = OhlcvHistory(exchange, clock, tickers=[BTC], days=10, retry=FAST_RETRY)
        frame = await history.refresh(BTC)
    assert len(frame) >= 59
    assert clock.sleeps == [7.0]  # Retry-After beats the 0.5 s backoff
    assert server.faults.injected == {"429": 1}


async def test_418_ban_within_the_cap_is_waited_out(
    server: RestServer, clock: RecordingClock
) -> None:
    server.faults.fail_next(418, path="/fapi/v1/klines", retry_after_secs=20)
    async with sim_exchange(server.url) as exchange:
        history = OhlcvHistory(exchange, clock, tickers=[BTC], days=10, retry=FAST_RETRY)
        assert len(await history.refresh(BTC)) >= 59
    assert clock.sleeps == [20.0]


async def test_a_long_ban_gives_up_at_once_with_its_retry_after(
    server: RestServer, clock: RecordingClock
) -> None:
    server.faults.fail_next(418, path="/fapi/v1/klines", retry_after_secs=7200)
    async with sim_exchange(server.url) as exchange:
        history = OhlcvHistory(exchange, clock, tickers=[BTC], days=10, retry=FAST_RETRY)
        with pytest.raises(CcxtRetryableError) as caught:
            await history.refresh(BTC)
    assert caught.value.retry_after_secs == 7200
    assert clock.sleeps == []  # retrying inside a ban would only extend it
    assert history.frame(BTC).empty


async def test_a_client_ignoring_429s_gets_banned() -> None:
    clock = VirtualClock(SIM_START_MS)  # one sim minute for the whole test
    async with (
        running_server(clock, weight_limit_1m=5, requests_after_429_before_ban=1) as srv,
        sim_exchange(srv.url, enable_rate_limit=False) as exchange,
    ):
        errors = []
        for _ in range(8):
            try:
                await exchange.fapiPublicGetPing()
            except ccxt_async.DDoSProtection as exc:
                errors.append(str(exc))
    assert [e.split()[1] for e in errors] == ["429", "429", "418"]
    assert (srv.limiter.rate_limited, srv.limiter.banned) == (2, 1)


@pytest.mark.parametrize("status", [500, 502, 503])
async def test_server_errors_are_retried(
    server: RestServer, clock: RecordingClock, status: int
) -> None:
    server.faults.fail_next(status, count=2, path="/fapi/v1/klines")
    async with sim_exchange(server.url) as exchange:
        history = OhlcvHistory(exchange, clock, tickers=[BTC], days=10, retry=FAST_RETRY)
        assert len(await history.refresh(BTC)) >= 59
    assert server.faults.injected == {str(status): 2}
    assert len(clock.sleeps) == 2


async def test_retries_run_out_as_a_retryable_error(
    server: RestServer, clock: RecordingClock
) -> None:
    server.faults.fail_next(503, count=50, path="/fapi/v1/klines")
    async with sim_exchange(server.url) as exchange:
        history = OhlcvHistory(exchange, clock, tickers=[BTC], days=10, retry=FAST_RETRY)
        with pytest.raises(CcxtRetryableError, match="after 4 attempts"):
            await history.refresh(BTC)
    assert server.faults.injected == {"503": 4}


async def test_a_slow_answer_times_out_and_is_retried(
    server: RestServer, clock: RecordingClock
) -> None:
    # real seconds. The timeout covers every request here, load_markets too, and each must
    # answer within it: at 300 ms a stall of a loaded machine timed exchangeInfo out. The delay
    # outlasts it well; the server's shutdown waits at most 1 s for the delayed handler.
    server.faults.delay_next(10.0, path="/fapi/v1/klines")
    async with sim_exchange(server.url, timeout_ms=2_000) as exchange:
        await exchange.load_markets()
        history = OhlcvHistory(exchange, clock, tickers=[BTC], days=10, retry=FAST_RETRY)
        assert len(await history.refresh(BTC)) >= 59
    assert server.faults.injected == {"delay": 1}
    assert len(clock.sleeps) == 1
    assert server.requests["/fapi/v1/klines"] == 2


async def test_a_bad_symbol_is_not_retried(server: RestServer, clock: RecordingClock) -> None:
    async with sim_exchange(server.url) as exchange:
        history = OhlcvHistory(exchange, clock, tickers=["DOGE/USDT"], retry=FAST_RETRY)
        with pytest.raises(CcxtRequestRejectedError, match="BadSymbol"):
            await history.refresh("DOGE/USDT")  # unknown to the loaded markets
        call = types.SimpleNamespace(
            run=lambda: exchange.fapiPublicGetKlines({"symbol": "DOGEUSDT", "interval": "4h"})
        )
        with pytest.raises(CcxtRequestRejectedError, match="Invalid symbol"):
            await call_with_retries(clock, call.run, what="klines", policy=FAST_RETRY)
    assert server.requests["/fapi/v1/klines"] == 1  # the server's -1121, asked once
    assert clock.sleeps == []


async def test_funding_via_ccxt_equals_the_recording(server: RestServer) -> None:
    funding = load_funding(BTC)
    async with sim_exchange(server.url) as exchange:
        current = await exchange.fetch_funding_rate("BTC/USDT:USDT")
        since = utc_ms(2025, 8, 1)
        history = await exchange.fetch_funding_rate_history("BTC/USDT:USDT", since=since, limit=50)
    latest = funding[funding.index <= current["timestamp"]].iloc[-1]
    assert current["fundingRate"] == pytest.approx(latest["funding_rate"], abs=1e-12)
    assert current["indexPrice"] is None  # not recorded, not invented
    expected = funding[funding.index >= since].iloc[:50]
    assert [h["timestamp"] for h in history] == expected.index.tolist()
    np.testing.assert_allclose([h["fundingRate"] for h in history], expected["funding_rate"])


async def test_unrecorded_open_interest_is_a_non_retryable_answer(
    server: RestServer, clock: RecordingClock
) -> None:
    async with sim_exchange(server.url) as exchange:
        await exchange.load_markets()
        with pytest.raises(CcxtRequestRejectedError, match="not available in the recorded data"):
            await call_with_retries(
                clock,
                lambda: exchange.fetch_open_interest("BTC/USDT:USDT"),
                what="open interest",
                policy=FAST_RETRY,
            )
    assert server.requests["/fapi/v1/openInterest"] == 1


def garbled_rows(body: Any) -> Any:
    """A klines answer with six rows no candle could have (Binance's rows: strings)."""
    rows = [list(row) for row in body]
    rows[1][1] = "NaN"  # open
    rows[2][2], rows[2][3] = rows[2][3], rows[2][2]  # high under the low
    rows[3][4] = "-1"  # close
    rows[4][5] = "-5"  # volume
    rows[5][2] = "Infinity"  # high
    rows[6][4] = "abc"  # close: ccxt reads None
    return rows


async def test_rows_that_cannot_be_candles_are_dropped_not_cached(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = VirtualClock(utc_ms(2025, 9, 1, 15, 59))
    async with running_server(clock) as srv, sim_exchange(srv.url) as exchange:
        srv.faults.rewrite_next(garbled_rows, path="/fapi/v1/klines")
        history = OhlcvHistory(exchange, clock, tickers=[BTC], days=10, retry=FAST_RETRY)
        frame = await history.refresh(BTC)
        expected = recorded_4h(BTC).loc[frame.index[0] : frame.index[-1]]
        garbled = expected.index[1:7]
        assert list(frame.index) == [t for t in expected.index if t not in garbled]
        assert np.isfinite(frame.to_numpy()).all() and (frame.to_numpy()[:, :4] > 0).all()
        assert (frame["high"] >= frame[["open", "close", "low"]].max(axis=1)).all()
        assert any("cannot be candles" in r.getMessage() for r in caplog.records)
        # the newest candle garbled after a 4h close: the append path drops it too
        await clock.advance(120)
        srv.faults.rewrite_next(
            lambda body: [[*row[:3], str(float(row[2]) * 2), *row[4:]] for row in body],
            path="/fapi/v1/klines",
        )  # low above the high
        closed = recorded_4h(BTC).loc[utc_ms(2025, 9, 1, 12)]
        o, h, low, c, v = closed.to_numpy(dtype=float).tolist()
        candle = Candle(
            open_time_ms=utc_ms(2025, 9, 1, 12), open=o, high=h, low=low, close=c, volume=v
        )
        await history.on_candle_closed(CandleClosed(ticker=BTC, timeframe="4h", candle=candle))
        assert history.frame(BTC).index[-1] == frame.index[-1]  # nothing appended
    assert srv.faults.injected["rewrite"] == 2
