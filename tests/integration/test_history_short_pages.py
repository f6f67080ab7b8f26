"""The history cache and the backfill read to the end of their span when the exchange pages
shorter than asked (Binance may, before the present): real ccxt against the sim's REST server on
loopback, its answers cut to 500 rows. They stopped at the first short page, so the 180-day 4h
window held its first 500 candles and the backfill stopped 500 candles in."""

from __future__ import annotations

from typing import Any

from test_history_ccxt import BTC, FAST_RETRY, recorded_4h
from test_sim_rest_support import RecordingClock, running_server, sim_exchange, utc_ms

from core.clock import DAY_MS
from core.scaled_clock import ScaledClock
from market.history import CcxtCandleBackfill, OhlcvHistory
from market.recorded import load_klines, resample
from market.timeframes import TIMEFRAME_MS, candle_open_ms

KLINES = "/fapi/v1/klines"
SIM_START_MS = utc_ms(2025, 9, 1, 13, 21)


def at_most_500(body: Any) -> Any:
    return body[:500]


async def test_the_history_window_is_read_whole_from_short_pages() -> None:
    clock = RecordingClock(ScaledClock(SIM_START_MS, speed=600.0))
    async with running_server(clock.inner) as server, sim_exchange(server.url) as exchange:
        server.faults.rewrite_next(at_most_500, 100, path=KLINES)
        history = OhlcvHistory(exchange, clock, tickers=[BTC], retry=FAST_RETRY)
        got = await history.refresh(BTC)
    refreshed_ms = history.refreshed_at_ms(BTC)
    assert refreshed_ms is not None
    expected = recorded_4h(BTC)
    expected = expected[
        (expected.index >= refreshed_ms - 180 * DAY_MS)
        & (expected.index < candle_open_ms(refreshed_ms, "4h"))
    ]
    assert len(got) in (1079, 1080)
    assert got.index.tolist() == expected.index.tolist()


async def test_the_backfill_is_read_whole_from_short_pages() -> None:
    clock = RecordingClock(ScaledClock(SIM_START_MS, speed=600.0))
    async with running_server(clock.inner) as server, sim_exchange(server.url) as exchange:
        server.faults.rewrite_next(at_most_500, 100, path=KLINES)
        backfill = CcxtCandleBackfill(exchange, clock=clock, retry=FAST_RETRY)
        since = clock.now_ms() - 15 * DAY_MS  # 1,440 15m candles
        candles = await backfill.closed_candles(BTC, "15m", since, clock.now_ms())
        now_ms = clock.now_ms()
    expected = resample(load_klines(BTC, "5m"), "5m", "15m")
    expected = expected[
        (expected.index >= since) & (expected.index + TIMEFRAME_MS["15m"] <= now_ms)
    ]
    opens = [c.open_time_ms for c in candles]
    assert len(opens) > 1000
    assert opens == expected.index.tolist()[: len(opens)]
    assert len(expected) - len(opens) <= 1  # a candle may close while the pages load
