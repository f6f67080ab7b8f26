"""OHLCV history, backfill, the ccxt factory and the retry policy: pure logic with fakes.

``FakeExchange`` answers ``fetch_ohlcv`` like Binance (candles opening at or after ``since``, up to
``params['until']`` and ``limit``, including the candle in progress) from a synthetic series, and
can be told to fail; ``FakeClock`` records sleeps and moves time by them.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import ccxt.async_support as ccxt_async
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.errors import RetryableError
from core.events import Candle, CandleClosed, MarketGap
from market.ccxt_client import (
    CcxtRequestRejectedError,
    CcxtRetryableError,
    RetryPolicy,
    call_with_retries,
    make_binanceusdm,
    retry_after_secs,
    to_ccxt_symbol,
)
from market.history import (
    DAY_MS,
    CcxtCandleBackfill,
    OhlcvHistory,
    empty_ohlcv_frame,
    rows_to_frame,
    with_newer_closes,
)

H4 = 4 * 3_600_000
START_MS = 1_700_000_000_000 - 1_700_000_000_000 % H4  # a 4h boundary
POLICY = RetryPolicy(max_attempts=4, base_secs=1.0, cap_secs=8.0, jitter_fraction=0.5)


class FakeClock:
    def __init__(self, now_ms: int) -> None:
        self.now = now_ms
        self.sleeps: list[float] = []

    def now_ms(self) -> int:
        return self.now

    def monotonic_secs(self) -> float:
        return self.now / 1000

    async def sleep(self, secs: float) -> None:
        self.sleeps.append(secs)
        self.now += int(secs * 1000)
        await asyncio.sleep(0)


class FakeExchange:
    """Binance's klines rules over a synthetic 4h series; ``until`` can be ignored (a bad server)."""

    def __init__(self, clock: FakeClock, *, step_ms: int = H4, honour_until: bool = True) -> None:
        self.clock = clock
        self.step_ms = step_ms
        self.honour_until = honour_until
        self.calls: list[dict[str, Any]] = []
        self.failures: list[BaseException] = []
        self.last_response_headers: dict[str, str] = {}
        self.symbols = {"BTC/USDT:USDT", "ETH/USDT:USDT"}

    @staticmethod
    def values(open_ms: int) -> list[float]:
        base = 100.0 + (open_ms // H4) % 97
        return [base, base + 2.0, base - 1.0, base + 1.0, 10.0 + open_ms % 7]

    async def fetch_ohlcv(
        self,
        symbol: str,
        timeframe: str = "1m",
        since: int | None = None,
        limit: int | None = None,
        params: dict[str, Any] | None = None,
    ) -> list[list[Any]]:
        params = params or {}
        self.calls.append({"symbol": symbol, "since": since, "limit": limit, **params})
        if self.failures:
            raise self.failures.pop(0)
        if symbol not in self.symbols:
            raise ccxt_async.BadSymbol(f"binanceusdm does not have market symbol {symbol}")
        now = self.clock.now_ms()
        last = now if not self.honour_until else min(now, params.get("until", now))
        first = since if since is not None else last - 500 * self.step_ms
        first = -(-first // self.step_ms) * self.step_ms
        opens = range(first, last + 1, self.step_ms)[: limit or 500]
        return [[o, *self.values(o)] for o in opens]


def test_make_binanceusdm_points_every_api_url_at_the_sim() -> None:
    exchange = make_binanceusdm("http://127.0.0.1:8123", timeout_ms=1234)
    urls = exchange.urls["api"]
    assert urls["fapiPublic"] == "http://127.0.0.1:8123/fapi/v1"
    assert urls["fapiData"] == "http://127.0.0.1:8123/futures/data"
    assert urls["sapi"] == "http://127.0.0.1:8123/sapi/v1"
    assert all(url.startswith("http://127.0.0.1:8123/") for url in urls.values())
    assert exchange.timeout == 1234 and exchange.enableRateLimit is True
    assert exchange.options["defaultType"] == "future"
    assert exchange.options["fetchCurrencies"] is False
    # the USDⓈ-M error table applies to the sim's URL: 503 -1008 is transient, as on Binance
    assert exchange.exceptions["exact"]["-1008"] is ccxt_async.OperationFailed
    assert exchange.exceptions["exact"]["-1121"] is ccxt_async.BadSymbol


def test_make_binanceusdm_without_a_url_keeps_binance() -> None:
    exchange = make_binanceusdm(None, enable_rate_limit=False)
    assert exchange.urls["api"]["fapiPublic"] == "https://fapi.binance.com/fapi/v1"
    assert exchange.enableRateLimit is False


def test_to_ccxt_symbol() -> None:
    assert to_ccxt_symbol("BTC/USDT") == "BTC/USDT:USDT"
    assert to_ccxt_symbol("SOL/USDT:USDT") == "SOL/USDT:USDT"
    with pytest.raises(ValueError, match="BASE/QUOTE"):
        to_ccxt_symbol("BTCUSDT")


def test_retry_after_header_is_read_case_insensitively() -> None:
    exchange = FakeExchange(FakeClock(0))
    assert retry_after_secs(exchange) is None
    exchange.last_response_headers = {"retry-after": "17"}
    assert retry_after_secs(exchange) == 17.0
    exchange.last_response_headers = {"Retry-After": "soon"}
    assert retry_after_secs(exchange) is None


def failing_call(errors: list[BaseException], result: str = "ok") -> tuple[Any, list[int]]:
    calls: list[int] = []

    async def call() -> str:
        calls.append(1)
        if errors:
            raise errors.pop(0)
        return result

    return call, calls


async def test_transient_errors_are_retried_with_exponential_backoff() -> None:
    clock = FakeClock(0)
    errors: list[BaseException] = [
        ccxt_async.RequestTimeout("t"),
        ccxt_async.ExchangeNotAvailable("502"),
        ccxt_async.OperationFailed("-1001"),
    ]
    call, calls = failing_call(errors)
    result = await call_with_retries(clock, call, what="x", policy=POLICY, rand=lambda: 0.0)
    assert result == "ok" and len(calls) == 4
    assert clock.sleeps == [1.0, 2.0, 4.0]


async def test_jitter_only_shortens_the_capped_delay() -> None:
    clock = FakeClock(0)
    call, _ = failing_call([ccxt_async.NetworkError("x")] * 3)
    await call_with_retries(clock, call, what="x", policy=POLICY, rand=lambda: 1.0)
    assert clock.sleeps == [0.5, 1.0, 2.0]


async def test_rate_limits_wait_at_least_retry_after() -> None:
    clock = FakeClock(0)
    call, _ = failing_call(
        [ccxt_async.DDoSProtection("429"), ccxt_async.RateLimitExceeded("-1003")]
    )
    await call_with_retries(
        clock, call, what="x", policy=POLICY, retry_after=lambda: 42.0, rand=lambda: 0.0
    )
    assert clock.sleeps == [42.0, 42.0]


async def test_a_ban_longer_than_allowed_gives_up_at_once() -> None:
    clock = FakeClock(0)
    call, calls = failing_call([ccxt_async.DDoSProtection("418")])
    with pytest.raises(CcxtRetryableError) as caught:
        await call_with_retries(clock, call, what="x", policy=POLICY, retry_after=lambda: 600.0)
    assert isinstance(caught.value, RetryableError)
    assert caught.value.retry_after_secs == 600.0
    assert (len(calls), clock.sleeps) == (1, [])


async def test_exhausted_retries_raise_a_retryable_error() -> None:
    clock = FakeClock(0)
    call, calls = failing_call([ccxt_async.ExchangeNotAvailable("503")] * 10)
    with pytest.raises(CcxtRetryableError, match="after 4 attempts"):
        await call_with_retries(clock, call, what="x", policy=POLICY)
    assert len(calls) == 4 and len(clock.sleeps) == 3


@pytest.mark.parametrize(
    "error",
    [ccxt_async.BadSymbol("nope"), ccxt_async.BadRequest("-1120"), ccxt_async.ExchangeError("?")],
)
async def test_rejected_requests_are_not_retried(error: BaseException) -> None:
    clock = FakeClock(0)
    call, calls = failing_call([error])
    with pytest.raises(CcxtRequestRejectedError):
        await call_with_retries(clock, call, what="x", policy=POLICY)
    assert (len(calls), clock.sleeps) == (1, [])


async def test_cancellation_is_never_swallowed() -> None:
    call, _ = failing_call([asyncio.CancelledError()])
    with pytest.raises(asyncio.CancelledError):
        await call_with_retries(FakeClock(0), call, what="x", policy=POLICY)


async def test_retries_need_a_clock() -> None:
    call, _ = failing_call([])
    with pytest.raises(ValueError, match="Clock"):
        await call_with_retries(None, call, what="x", policy=POLICY)
    assert await call_with_retries(None, call, what="x", policy=RetryPolicy(max_attempts=1)) == "ok"


TRANSIENT = st.sampled_from(
    [ccxt_async.RequestTimeout, ccxt_async.DDoSProtection, ccxt_async.ExchangeNotAvailable]
)


@given(
    kinds=st.lists(TRANSIENT, max_size=6),
    hint=st.one_of(st.none(), st.floats(0, 120)),
    rand=st.floats(0, 1),
)
async def test_any_run_of_transient_failures_ends_in_success_or_a_retryable_error(
    kinds: list[type[BaseException]], hint: float | None, rand: float
) -> None:
    clock = FakeClock(0)
    call, calls = failing_call([kind("x") for kind in kinds])
    try:
        assert await call_with_retries(
            clock, call, what="x", policy=POLICY, retry_after=lambda: hint, rand=lambda: rand
        ) == "ok"  # fmt: skip
        assert len(kinds) < POLICY.max_attempts and len(calls) == len(kinds) + 1
    except CcxtRetryableError:
        assert len(kinds) >= POLICY.max_attempts
        assert len(calls) == POLICY.max_attempts
    assert len(clock.sleeps) == len(calls) - 1
    assert all(0 < s <= max(POLICY.cap_secs, hint or 0.0) for s in clock.sleeps)


def test_rows_to_frame_shapes_like_recorded_frames_and_drops_incomplete_rows() -> None:
    frame = rows_to_frame([[2000, 1, 2, 0.5, 1.5, 10], [1000, 1, 2, 0.5, None, 10]])
    assert frame.index.tolist() == [2000]
    assert frame.index.name == "open_time_ms" and frame.index.dtype == np.int64
    assert list(frame.columns) == ["open", "high", "low", "close", "volume"]
    assert (frame.dtypes == np.float64).all()
    assert rows_to_frame([]).equals(empty_ohlcv_frame())


async def test_refresh_caches_the_window_of_closed_candles_only() -> None:
    clock = FakeClock(START_MS + 10 * DAY_MS + 3_600_000)  # one hour into a 4h candle
    exchange = FakeExchange(clock, honour_until=False)  # even a server sending the partial one
    history = OhlcvHistory(exchange, clock, tickers=["BTC/USDT"], days=2)
    frame = await history.refresh("BTC/USDT")
    # 2 days back from 1h into a candle: 11 closed candles; the one in progress is not cached
    assert len(frame) == 11
    assert frame.index[-1] == START_MS + 10 * DAY_MS - H4
    assert frame.index[0] >= clock.now - 2 * DAY_MS
    assert exchange.calls[0]["symbol"] == "BTC/USDT:USDT"
    assert exchange.calls[0]["until"] == frame.index[-1]  # asks only for closed candles
    assert frame.loc[frame.index[0]].tolist() == FakeExchange.values(int(frame.index[0]))
    assert history.refreshed_at_ms("BTC/USDT") == clock.now


async def test_pages_stop_at_the_page_limit_boundary() -> None:
    clock = FakeClock(START_MS + 400 * DAY_MS)
    exchange = FakeExchange(clock)
    history = OhlcvHistory(exchange, clock, tickers=["ETH/USDT"], days=365)
    frame = await history.refresh("ETH/USDT")
    assert len(frame) == 365 * 6
    assert [c["since"] for c in exchange.calls] == [
        clock.now - 365 * DAY_MS,
        clock.now - 365 * DAY_MS + 1000 * H4,
        clock.now - 365 * DAY_MS + 2000 * H4,
    ]
    assert [c["limit"] for c in exchange.calls] == [1000, 1000, 365 * 6 - 2000]
    assert frame.index.is_unique and frame.index.is_monotonic_increasing


async def test_candle_closed_fetches_only_newer_candles_and_slides_the_window() -> None:
    clock = FakeClock(START_MS + 20 * DAY_MS + 60_000)
    exchange = FakeExchange(clock)
    history = OhlcvHistory(exchange, clock, tickers=["BTC/USDT"], days=3)
    await history.refresh("BTC/USDT")
    newest = int(history.frame("BTC/USDT").index[-1])
    clock.now += 2 * H4
    candle = Candle(open_time_ms=newest + H4, open=1, high=1, low=1, close=1, volume=1)
    await history.on_candle_closed(CandleClosed(ticker="BTC/USDT", timeframe="4h", candle=candle))
    assert exchange.calls[-1]["since"] == newest + H4
    # two candles asked, not a page: Binance weighs limit < 100 as 1 request, limit 1000 as 5,
    # and ccxt's limiter would hold the next ticker's refresh 250 ms behind this one
    assert exchange.calls[-1]["limit"] == 2
    frame = history.frame("BTC/USDT")
    assert frame.index[-1] == newest + 2 * H4
    assert len(frame) == 17 and frame.index[0] >= clock.now - 3 * DAY_MS


async def test_other_events_timeframes_and_tickers_are_ignored() -> None:
    clock = FakeClock(START_MS + DAY_MS)
    exchange = FakeExchange(clock)
    history = OhlcvHistory(exchange, clock, tickers=["BTC/USDT"], days=1)
    candle = Candle(open_time_ms=START_MS, open=1, high=1, low=1, close=1, volume=1)
    await history.on_candle_closed(CandleClosed(ticker="BTC/USDT", timeframe="1h", candle=candle))
    await history.on_candle_closed(CandleClosed(ticker="XRP/USDT", timeframe="4h", candle=candle))
    gap = MarketGap(ticker="BTC/USDT", timeframe="4h", missing_from_ms=0, missing_to_ms=1,
                    missing_candles=1)  # fmt: skip
    await history.on_candle_closed(gap)
    assert exchange.calls == []
    assert history.frame("BTC/USDT").empty
    with pytest.raises(KeyError, match="not tracked"):
        history.frame("XRP/USDT")


async def test_concurrent_refreshes_of_one_ticker_do_not_duplicate() -> None:
    clock = FakeClock(START_MS + 30 * DAY_MS)
    exchange = FakeExchange(clock)
    history = OhlcvHistory(exchange, clock, tickers=["BTC/USDT"], days=5)
    await asyncio.gather(history.refresh("BTC/USDT"), history.refresh_newest("BTC/USDT"))
    frame = history.frame("BTC/USDT")
    assert frame.index.is_unique and len(frame) == 30
    assert len(exchange.calls) == 1  # the second waited for the first and found nothing newer


async def test_a_failed_refresh_keeps_the_cache_and_raises_retryable() -> None:
    clock = FakeClock(START_MS + 30 * DAY_MS)
    exchange = FakeExchange(clock)
    history = OhlcvHistory(exchange, clock, tickers=["BTC/USDT"], days=5, retry=POLICY)
    await history.refresh("BTC/USDT")
    before = history.frame("BTC/USDT")
    exchange.failures = [ccxt_async.ExchangeNotAvailable("down")] * 4
    clock.now += H4
    with pytest.raises(RetryableError):
        await history.refresh_newest("BTC/USDT")
    assert history.frame("BTC/USDT").equals(before)


async def test_backfill_returns_candles_closed_between_the_instants() -> None:
    clock = FakeClock(START_MS + 50 * DAY_MS + 7)
    exchange = FakeExchange(clock)
    backfill = CcxtCandleBackfill(exchange, clock=clock)
    since = START_MS + 40 * DAY_MS + 1  # the candle opening at the boundary is before it
    until = START_MS + 41 * DAY_MS - 1  # the 20:00 candle closes exactly then: included
    candles = await backfill.closed_candles("BTC/USDT", "4h", since, until)
    assert [c.open_time_ms for c in candles] == [
        START_MS + 40 * DAY_MS + k * H4 for k in range(1, 6)
    ]
    assert candles[0].close == FakeExchange.values(candles[0].open_time_ms)[3]
    candles = await backfill.closed_candles("BTC/USDT", "4h", clock.now - H4, clock.now + DAY_MS)
    assert candles == []  # the future is capped at now and the candle in progress is not closed


async def test_backfill_without_a_clock_makes_one_attempt() -> None:
    clock = FakeClock(START_MS + DAY_MS)
    exchange = FakeExchange(clock)
    exchange.failures = [ccxt_async.RequestTimeout("slow")]
    backfill = CcxtCandleBackfill(exchange)
    with pytest.raises(CcxtRetryableError):
        await backfill.closed_candles("BTC/USDT", "4h", START_MS, START_MS + DAY_MS)
    assert len(exchange.calls) == 1
    candles = await backfill.closed_candles("BTC/USDT", "4h", START_MS, START_MS + DAY_MS - 1)
    assert len(candles) == 6


def _candle(open_ms: int, close: float) -> Candle:
    return Candle(
        open_time_ms=open_ms, open=close, high=close + 1, low=close - 1, close=close, volume=2
    )


def test_the_history_read_to_now_appends_only_the_streams_newer_closes() -> None:
    step = 14_400_000
    cached = rows_to_frame([(0, 1, 2, 0.5, 1.5, 3), (step, 1.5, 2, 1, 1.8, 4)])
    stream = [_candle(0, 9.0), _candle(step, 9.0), _candle(2 * step, 2.0), _candle(3 * step, 2.5)]
    extended = with_newer_closes(cached, stream)
    assert list(extended.index) == [0, step, 2 * step, 3 * step]
    assert list(extended["close"]) == [1.5, 1.8, 2.0, 2.5]  # the cache's own rows are kept
    assert with_newer_closes(cached, stream[:2]) is cached  # nothing newer: the cache as it is
    assert list(with_newer_closes(empty_ohlcv_frame(), stream)["close"]) == [9.0, 9.0, 2.0, 2.5]


class _AnswersNoCandles(FakeExchange):
    """What ccxt makes of a 200 holding an HTML page (or rows nested a level too deep): none."""

    async def fetch_ohlcv(self, *args: Any, **kwargs: Any) -> list[list[Any]]:
        await super().fetch_ohlcv(*args, **kwargs)
        return []


async def test_a_history_of_no_candles_is_said_as_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """It was an INFO line of '0 new candles fetched': the regimes ran on nothing, unseen."""
    clock = FakeClock(START_MS + 10 * DAY_MS)
    history = OhlcvHistory(_AnswersNoCandles(clock), clock, tickers=["BTC/USDT"], days=2)
    with caplog.at_level(logging.INFO, logger="market.history"):
        frame = await history.refresh("BTC/USDT")
    assert frame.empty
    (said,) = [r for r in caplog.records if "history:" in r.getMessage()]
    assert said.levelno == logging.WARNING
    assert "the exchange answered none that could be read" in said.getMessage()
