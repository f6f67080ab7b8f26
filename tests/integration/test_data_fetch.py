"""``vigil data fetch`` through real ccxt against the simulator's REST server on loopback: the
pages, the rate limiter's 429, a fetch killed between pages resuming after its last stored row, and
a data dir that replays (tests/e2e/test_replay_data_dir.py)."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from fakes.tasks import stop_tasks
from test_sim_rest_support import running_server, utc_ms

from core.scaled_clock import ScaledClock
from market.ccxt_client import OHLCV_PAGE_LIMIT, RetryPolicy, make_binanceusdm
from market.datacheck import check_data_dir
from market.recorded import kline_path, load_funding, load_klines
from runner.data.command import fetch_into
from runner.data.fetch import Fetcher, FetchRequest

FIRST_MS = utc_ms(2025, 3, 1)
END_MS = utc_ms(2025, 3, 6)  # five days: 1,440 5m bars, two pages
RETRY = RetryPolicy(max_attempts=4, base_secs=0.5, cap_secs=30.0, jitter_fraction=0.5)


def request(out: Path, tickers: tuple[str, ...] = ("BTC/USDT",)) -> FetchRequest:
    return FetchRequest(
        tickers=tickers, interval="5m", start_ms=FIRST_MS, end_ms=END_MS, out_dir=out
    )


def recorded(ticker: str) -> pd.DataFrame:
    return load_klines(ticker, "5m").loc[FIRST_MS : END_MS - 1]


async def test_fetch_pages_klines_and_funding_equal_to_the_recording(tmp_path: Path) -> None:
    clock = ScaledClock(utc_ms(2025, 3, 10), speed=600.0)
    async with running_server(clock) as server:
        server.faults.fail_next(429, 1, path="/fapi/v1/klines", retry_after_secs=2)
        out = tmp_path / "data"
        text = io.StringIO()
        results = await fetch_into(request(out, ("BTC/USDT", "ETH/USDT")), server.url, clock, text)
        assert server.faults.injected["429"] == 1  # waited out and retried
    assert [(r.name, r.rows) for r in results] == [
        ("BTCUSDT-5m.csv.gz", 1440),
        ("BTCUSDT-funding.csv.gz", 15),
        ("ETHUSDT-5m.csv.gz", 1440),
        ("ETHUSDT-funding.csv.gz", 15),
    ]
    for ticker in ("BTC/USDT", "ETH/USDT"):
        pd.testing.assert_frame_equal(load_klines(ticker, "5m", out), recorded(ticker))
        funding = load_funding(ticker).loc[FIRST_MS : END_MS - 1]
        pd.testing.assert_frame_equal(load_funding(ticker, out), funding)
    assert not (out / ".partial").exists() or not any((out / ".partial").iterdir())
    # a second fetch of the same span finds it stored and asks nothing for the klines
    async with running_server(clock) as server:
        again = await fetch_into(request(out), server.url, clock, io.StringIO())
    assert again[0].skipped


async def test_a_fetch_killed_between_pages_resumes_after_its_last_stored_row(
    tmp_path: Path,
) -> None:
    clock = ScaledClock(utc_ms(2025, 3, 10), speed=600.0)
    out = tmp_path / "data"
    partial = out / ".partial" / "BTCUSDT-5m.csv"
    async with running_server(clock) as server:
        exchange = make_binanceusdm(server.url)
        page_stored = asyncio.Event()

        def after_page(_line: str) -> None:
            # the next page's request hangs on the server: the fetch is killed while it waits
            server.faults.delay_next(30.0, 1, path="/fapi/v1/klines")
            page_stored.set()

        try:
            fetcher = Fetcher(exchange, clock, retry=RETRY, progress=after_page)
            task = asyncio.create_task(fetcher.run(request(out)))
            await asyncio.wait_for(page_stored.wait(), timeout=60)
            await stop_tasks(task)
        finally:
            await exchange.close()
        assert not kline_path("BTC/USDT", "5m", out).exists()
        stored = partial.read_text().count("\n") - 1
        assert stored == OHLCV_PAGE_LIMIT
        server.faults.clear()
        results = await fetch_into(request(out), server.url, clock, io.StringIO())
    klines = results[0]
    assert (klines.resumed_from_rows, klines.rows) == (stored, 1440 - stored)
    pd.testing.assert_frame_equal(load_klines("BTC/USDT", "5m", out), recorded("BTC/USDT"))
    assert not partial.exists()


def garbled_klines(body: Any) -> Any:
    """The first klines page with four rows no candle could have (Binance's rows: strings)."""
    rows = [list(row) for row in body]
    rows[10][4] = "NaN"  # close
    rows[11][2], rows[11][3] = rows[11][3], rows[11][2]  # high under the low
    rows[12][1] = "-3"  # open
    rows[13][4] = "abc"  # close: ccxt reads None
    return rows


def garbled_funding(body: Any) -> Any:
    items = [dict(item) for item in body]
    items[2]["fundingRate"] = "NaN"
    items[3]["fundingRate"] = "Infinity"
    return items


async def test_rows_the_exchange_garbled_are_dropped_counted_and_leave_a_gap(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = ScaledClock(utc_ms(2025, 3, 10), speed=600.0)
    out = tmp_path / "data"
    async with running_server(clock) as server:
        server.faults.rewrite_next(garbled_klines, path="/fapi/v1/klines")
        server.faults.rewrite_next(garbled_funding, path="/fapi/v1/fundingRate")
        text = io.StringIO()
        klines, funding = await fetch_into(request(out), server.url, clock, text)
        assert server.faults.injected["rewrite"] == 2
    assert (klines.rows, klines.dropped) == (1436, 4)
    assert (funding.rows, funding.dropped) == (13, 2)
    expected = recorded("BTC/USDT")
    garbled = expected.index[10:14]
    pd.testing.assert_frame_equal(load_klines("BTC/USDT", "5m", out), expected.drop(garbled))
    assert len(load_funding("BTC/USDT", out)) == 13
    assert any("cannot be candles" in r.getMessage() for r in caplog.records)
    # the hole is a gap that data check reports; nothing stored is a row replay would refuse
    (btc,) = [check for check in check_data_dir(out) if check.kind == "klines 5m"]
    assert (btc.gap_count, btc.missing_bars, btc.bad_rows) == (1, 4, [])
