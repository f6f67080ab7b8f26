"""A klines answer with a row whose open time is off the timeframe's grid (a garbled answer: no
Binance 4h candle opens 1 ms after the hour) is dropped with a warning, never cached or backfilled:
real ccxt against the sim's REST on loopback. It was taken as a candle: the 4h history held a
candle at 08:00:00.001 for the 08:00 one (what the regime fits read), and a reconnect's backfill
returned it."""

from __future__ import annotations

from typing import Any

import pytest
from test_history_ccxt import BTC, FAST_RETRY, recorded_4h
from test_sim_rest_support import running_server, sim_exchange, utc_ms

from core.clock import VirtualClock
from market.history import CcxtCandleBackfill, OhlcvHistory

KLINES = "/fapi/v1/klines"
SHIFTED = (2, 5)  # rows whose open time the answer moves off the grid


def off_grid(body: Any) -> Any:
    rows = [list(row) for row in body]
    for i in SHIFTED:
        rows[i][0] = rows[i][0] + 1
    return rows


async def test_an_off_grid_row_is_not_cached(caplog: pytest.LogCaptureFixture) -> None:
    clock = VirtualClock(utc_ms(2025, 9, 1, 15, 59))
    async with running_server(clock) as srv, sim_exchange(srv.url) as exchange:
        srv.faults.rewrite_next(off_grid, path=KLINES)
        history = OhlcvHistory(exchange, clock, tickers=[BTC], days=10, retry=FAST_RETRY)
        frame = await history.refresh(BTC)
    assert (frame.index % (4 * 3_600_000) == 0).all()
    expected = recorded_4h(BTC).loc[frame.index[0] : frame.index[-1]]
    assert list(frame.index) == [t for i, t in enumerate(expected.index) if i not in SHIFTED]
    assert any("off the 4h grid" in r.getMessage() for r in caplog.records)


async def test_an_off_grid_row_is_not_backfilled() -> None:
    clock = VirtualClock(utc_ms(2025, 9, 1, 15, 59))
    since = utc_ms(2025, 8, 30)
    async with running_server(clock) as srv, sim_exchange(srv.url) as exchange:
        srv.faults.rewrite_next(off_grid, path=KLINES)
        backfill = CcxtCandleBackfill(exchange, clock=clock, retry=FAST_RETRY)
        candles = await backfill.closed_candles(BTC, "4h", since, clock.now_ms())
    expected = recorded_4h(BTC).loc[since : utc_ms(2025, 9, 1, 8)]
    opens = [c.open_time_ms for c in candles]
    assert opens == [t for i, t in enumerate(expected.index) if i not in SHIFTED]
