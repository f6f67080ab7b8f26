"""Replay's in-process recorded adapters: closed candles, funding and Fear & Greed as of the clock's
now, never later, through the live parsers (OhlcvHistory, CcxtCandleBackfill, BinanceDerivatives,
fear_greed_from_payload, DerivativesMonitor). Expected values come from the recorded files.

``answered_at_once`` runs an adapter call to completion WITHOUT an event loop: a coroutine that
suspended (a socket, a thread, a sleep) would fail it, so it also proves replay's driver never waits
on these adapters.
"""

from __future__ import annotations

import functools
from collections.abc import Coroutine
from dataclasses import replace
from typing import Any, TypeVar

import numpy as np
import pandas as pd
import pytest
from ccxt.base import errors as ccxt_errors
from fakes.fixed_clock import FixedClock
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_budget import examples

from core.bus import EventBus
from core.clock import VirtualClock
from derivatives.cache import SourceNotAvailableError
from derivatives.config import DerivativesConfig
from derivatives.monitor import DerivativesMonitor
from derivatives.sources import build_context_fields
from derivatives.web_sources import fear_greed_from_payload
from market.ccxt_client import CcxtRequestRejectedError, to_ccxt_symbol
from market.history import DAY_MS, CcxtCandleBackfill, OhlcvHistory
from market.recorded import load_fear_greed, load_funding, load_klines, resample
from market.timeframes import TIMEFRAME_MS, candle_open_ms
from sim.feed import SimFeed
from sim.inprocess import RecordedOhlcvExchange, RecordedPremiumIndex
from sim.recorded_sources import NOT_RECORDED, build_recorded_context_fields
from sim.recorded_spot import RecordedSpotKlines
from sim.rest_payloads import FearGreedBook

T = TypeVar("T")
TICKERS = ("BTC/USDT", "ETH/USDT", "SOL/USDT")
TIMEFRAMES = ("5m", "15m", "1h", "4h")
HOUR_MS = 3_600_000
NOW_MS = 1_747_219_020_000 + 12_345  # 2025-05-14T10:37:00.012Z: mid-candle for every timeframe
#: 2025-11-14T10:37:00.012Z: mid-candle, with more than 180 days of recording before it
LATE_NOW_MS = 1_763_116_620_000 + 12_345
FAST = settings(
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


def answered_at_once(coro: Coroutine[Any, Any, T]) -> T:
    """The coroutine's result, provided it finishes without ever suspending."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coro.close()
    raise AssertionError("the adapter suspended: it waited on something")


@pytest.fixture(scope="module")
def feed() -> SimFeed:
    return SimFeed(TICKERS)


@functools.cache
def recorded(ticker: str, timeframe: str) -> pd.DataFrame:
    return resample(load_klines(ticker, "5m"), "5m", timeframe)


@functools.cache
def recorded_funding(ticker: str) -> pd.DataFrame:
    return load_funding(ticker)


@functools.cache
def recorded_fear_greed() -> pd.DataFrame:
    return load_fear_greed()


@functools.cache
def fng_book() -> FearGreedBook:
    return FearGreedBook(recorded_fear_greed())


def newest_closed_open_ms(ticker: str, timeframe: str, now_ms: int) -> int | None:
    opens = recorded(ticker, timeframe).index.to_numpy(dtype=np.int64)
    row = int(np.searchsorted(opens, now_ms - TIMEFRAME_MS[timeframe] + 1, side="right")) - 1
    return int(opens[row]) if row >= 0 else None


def assert_rows_are_recorded(rows: list[list[Any]], ticker: str, timeframe: str) -> None:
    frame = recorded(ticker, timeframe).loc[[int(r[0]) for r in rows]]
    got = np.array([r[1:6] for r in rows], dtype=np.float64)
    expected = frame[["open", "high", "low", "close", "volume"]].to_numpy()
    np.testing.assert_array_equal(got[:, :4], expected[:, :4])
    np.testing.assert_allclose(got[:, 4], expected[:, 4], rtol=1e-12)  # sent at step precision


# --- no look-ahead ---------------------------------------------------------------------------


@FAST
@given(
    ticker=st.sampled_from(TICKERS),
    timeframe=st.sampled_from(TIMEFRAMES),
    now_ms=st.integers(1_735_603_200_000 - DAY_MS, 1_771_520_400_000 + DAY_MS),
)
def test_ohlcv_serves_only_candles_closed_by_now_ending_with_the_newest(
    feed: SimFeed, ticker: str, timeframe: str, now_ms: int
) -> None:
    exchange = RecordedOhlcvExchange(feed, FixedClock(now_ms))
    rows = answered_at_once(exchange.fetch_ohlcv(to_ccxt_symbol(ticker), timeframe))
    tf_ms = TIMEFRAME_MS[timeframe]
    assert all(int(r[0]) + tf_ms - 1 <= now_ms for r in rows)
    newest = newest_closed_open_ms(ticker, timeframe, now_ms)
    if newest is None:
        assert rows == []
        return
    assert rows[-1][0] == newest
    assert len(rows) == min(500, len(recorded(ticker, timeframe).loc[:newest]))
    assert [r[0] for r in rows] == sorted({r[0] for r in rows})
    assert_rows_are_recorded(rows[-3:], ticker, timeframe)


@FAST
@given(
    timeframe=st.sampled_from(TIMEFRAMES),
    now_ms=st.integers(1_740_000_000_000, 1_771_000_000_000),
    back=st.integers(0, 2000),
    limit=st.one_of(st.none(), st.integers(1, 2000)),
    until_back=st.one_of(st.none(), st.integers(-50, 2000)),
)
def test_since_limit_and_until_never_reach_past_now(
    feed: SimFeed,
    timeframe: str,
    now_ms: int,
    back: int,
    limit: int | None,
    until_back: int | None,
) -> None:
    tf_ms = TIMEFRAME_MS[timeframe]
    since = candle_open_ms(now_ms, timeframe) - back * tf_ms
    until = None if until_back is None else now_ms - until_back * tf_ms
    params = {} if until is None else {"until": until}
    exchange = RecordedOhlcvExchange(feed, FixedClock(now_ms))
    if until is not None and since > until:
        with pytest.raises(ccxt_errors.BadRequest):
            answered_at_once(exchange.fetch_ohlcv("ETH/USDT:USDT", timeframe, since, limit, params))
        return
    rows = answered_at_once(exchange.fetch_ohlcv("ETH/USDT:USDT", timeframe, since, limit, params))
    ccxt_limit = min(limit, 1000) if limit is not None else (1000 if until is not None else 500)
    assert len(rows) <= ccxt_limit
    assert all(since <= r[0] and r[0] + tf_ms - 1 <= now_ms for r in rows)
    if until is not None:
        assert all(r[0] <= until for r in rows)
    # with since: the FIRST candles from since (Binance's rule), none skipped
    opens = recorded("ETH/USDT", timeframe).index
    last_open = min(now_ms - tf_ms + 1, until if until is not None else now_ms)
    expected = opens[(opens >= since) & (opens <= last_open)][:ccxt_limit]
    assert [r[0] for r in rows] == expected.tolist()


@FAST
@given(now_ms=st.integers(1_735_603_200_000, 1_771_520_400_000))
def test_premium_index_funding_is_the_latest_settled_by_now(feed: SimFeed, now_ms: int) -> None:
    premium = RecordedPremiumIndex(feed, FixedClock(now_ms))
    rows = answered_at_once(premium.fapiPublicGetPremiumIndex({}))
    assert isinstance(rows, list)
    by_symbol = {row["symbol"]: row for row in rows}
    for ticker in TICKERS:
        price = feed.last_price(ticker, now_ms)
        if price is None:  # past the recording: no price, so no row (as the sim leaves it out)
            assert ticker.replace("/", "") not in by_symbol
            continue
        funding = recorded_funding(ticker)
        settled = funding[funding.index <= now_ms]
        row = by_symbol[ticker.replace("/", "")]
        assert row["time"] == now_ms and row["nextFundingTime"] > now_ms
        if settled.empty:
            assert "lastFundingRate" not in row
            continue
        assert float(row["lastFundingRate"]) == pytest.approx(
            settled["funding_rate"].iloc[-1], abs=5e-9
        )
        at = feed.funding_rate_at(ticker, now_ms)
        assert at is not None and at.funding_time_ms == int(settled.index[-1]) <= now_ms
        assert row["markPrice"] == f"{price:.{feed.price_decimals(ticker)}f}"


@FAST
@given(now_ms=st.integers(1_735_603_200_000, 1_771_520_400_000))
def test_fear_greed_is_the_latest_daily_value_at_or_before_now(now_ms: int) -> None:
    payload = fng_book().answer({"limit": "1"}, now_ms // 1000)
    days = recorded_fear_greed()
    known = days[days.index <= now_ms // 1000]
    if now_ms // 1000 >= int(days.index[-1]) + 86_400:  # the recording ended (2025-06-26)
        with pytest.raises(SourceNotAvailableError, match="no Fear & Greed value recorded"):
            fear_greed_from_payload(payload)
        return
    value = fear_greed_from_payload(payload)
    assert value["timestamp_ms"] <= now_ms
    assert value["timestamp_ms"] == int(known.index[-1]) * 1000
    assert value["value"] == int(known["value"].iloc[-1])


# --- ccxt's rules and errors ------------------------------------------------------------------


def test_limit_defaults_to_500_and_is_capped_at_ccxts_1000(feed: SimFeed) -> None:
    exchange = RecordedOhlcvExchange(feed, FixedClock(NOW_MS))
    fetch = functools.partial(exchange.fetch_ohlcv, "BTC/USDT:USDT", "5m")
    assert len(answered_at_once(fetch())) == 500
    assert len(answered_at_once(fetch(limit=1500))) == 1000
    since = candle_open_ms(NOW_MS, "5m") - 3000 * TIMEFRAME_MS["5m"]
    assert len(answered_at_once(fetch(since=since, params={"until": NOW_MS}))) == 1000
    assert len(answered_at_once(fetch(since=since))) == 500
    # an explicit endTime wins over until, as ccxt's request does
    rows = answered_at_once(fetch(since=since, params={"until": NOW_MS, "endTime": since}))
    assert [r[0] for r in rows] == [since]


@pytest.mark.parametrize(
    ("symbol", "timeframe", "kwargs", "error"),
    [
        (
            "BTC/USDT",
            "5m",
            {},
            ccxt_errors.BadSymbol,
        ),  # spot-style: ccxt binanceusdm refuses it too
        ("DOGE/USDT:USDT", "5m", {}, ccxt_errors.BadSymbol),
        ("BTC/USDT:USDT", "2h", {}, ccxt_errors.BadRequest),
        ("BTC/USDT:USDT", "5m", {"limit": 0}, ccxt_errors.BadRequest),
        ("BTC/USDT:USDT", "5m", {"params": {"until": "soon"}}, ccxt_errors.BadRequest),
        ("BTC/USDT:USDT", "5m", {"params": {"price": "mark"}}, ccxt_errors.NotSupported),
    ],
)
def test_bad_requests_raise_what_ccxt_raises(
    feed: SimFeed, symbol: str, timeframe: str, kwargs: dict[str, Any], error: type[Exception]
) -> None:
    exchange = RecordedOhlcvExchange(feed, FixedClock(NOW_MS))
    with pytest.raises(error):
        answered_at_once(exchange.fetch_ohlcv(symbol, timeframe, **kwargs))


def test_premium_index_one_symbol_and_errors(feed: SimFeed) -> None:
    premium = RecordedPremiumIndex(feed, FixedClock(NOW_MS))
    row = answered_at_once(premium.fapiPublicGetPremiumIndex({"symbol": "SOLUSDT"}))
    assert isinstance(row, dict) and row["symbol"] == "SOLUSDT"
    with pytest.raises(ccxt_errors.BadSymbol, match="-1121"):
        answered_at_once(premium.fapiPublicGetPremiumIndex({"symbol": "DOGEUSDT"}))
    with pytest.raises(ccxt_errors.NotSupported):
        answered_at_once(premium.fapiPublicGetPremiumIndex({"symbol": "SOLUSDT", "x": 1}))
    before = RecordedPremiumIndex(feed, FixedClock(1_735_603_200_000 - 1))
    with pytest.raises(ccxt_errors.BadRequest, match="not available in the recorded data"):
        answered_at_once(before.fapiPublicGetPremiumIndex({"symbol": "SOLUSDT"}))
    assert answered_at_once(before.fapiPublicGetPremiumIndex({})) == []


# --- the live consumers over the adapters ------------------------------------------------------


async def test_ohlcv_history_holds_180_days_of_4h_ending_with_the_last_closed(
    feed: SimFeed,
) -> None:
    clock = VirtualClock(LATE_NOW_MS)
    history = OhlcvHistory(RecordedOhlcvExchange(feed, clock), clock, tickers=TICKERS)
    await history.refresh_all()
    last_closed = candle_open_ms(LATE_NOW_MS, "4h") - TIMEFRAME_MS["4h"]
    for ticker in TICKERS:
        frame = history.frame(ticker)
        expected = recorded(ticker, "4h").loc[LATE_NOW_MS - 180 * DAY_MS : last_closed]
        assert len(frame) == 180 * 6 - 1  # mid-candle now: the window's first is cut
        assert frame.index[-1] == last_closed
        assert frame.index.tolist() == expected.index.tolist()
        np.testing.assert_array_equal(frame[["open", "high", "low", "close"]], expected.iloc[:, :4])
        np.testing.assert_allclose(frame["volume"], expected["volume"], rtol=1e-12)

    # a millisecond before the next 4h close nothing new; at the close the candle comes in
    next_close_ms = last_closed + 2 * TIMEFRAME_MS["4h"]
    await clock.advance((next_close_ms - 1 - LATE_NOW_MS) / 1000)
    assert (await history.refresh_newest("BTC/USDT")).index[-1] == last_closed
    await clock.advance(0.001)
    assert (await history.refresh_newest("BTC/USDT")).index[-1] == last_closed + TIMEFRAME_MS["4h"]


async def test_unknown_ticker_is_rejected_like_the_live_path(feed: SimFeed) -> None:
    clock = VirtualClock(NOW_MS)
    history = OhlcvHistory(RecordedOhlcvExchange(feed, clock), clock, tickers=["DOGE/USDT"])
    with pytest.raises(CcxtRequestRejectedError, match="BadSymbol"):
        await history.refresh("DOGE/USDT")


async def test_backfill_returns_closed_candles_only(feed: SimFeed) -> None:
    clock = VirtualClock(NOW_MS)
    backfill = CcxtCandleBackfill(RecordedOhlcvExchange(feed, clock), clock=clock)
    since = NOW_MS - 2 * HOUR_MS
    candles = await backfill.closed_candles("SOL/USDT", "5m", since, NOW_MS + HOUR_MS)
    expected = recorded("SOL/USDT", "5m").loc[since : NOW_MS - TIMEFRAME_MS["5m"] + 1]
    assert [c.open_time_ms for c in candles] == expected.index.tolist()
    assert candles[-1].open_time_ms + TIMEFRAME_MS["5m"] - 1 <= NOW_MS
    assert [c.close for c in candles] == expected["close"].tolist()


def _shape(fields: list[Any]) -> list[tuple[str, str, Any]]:
    return [(f.field, f.source.name, f.source.policy) for f in fields]


def _live_shape(fields: list[Any]) -> list[tuple[str, str, Any]]:
    # the recording is read in-process: the same timing, without the network's timeout
    return [
        (field, name, replace(policy, timeout_secs=None)) for field, name, policy in _shape(fields)
    ]


def test_recorded_fields_match_the_live_builder(feed: SimFeed) -> None:
    config = DerivativesConfig()
    clock = VirtualClock(NOW_MS)
    live = build_context_fields(config, clock, TICKERS, exchange=object())
    replay = build_recorded_context_fields(
        config, clock, TICKERS, feed, fng_book(), RecordedSpotKlines()
    )
    assert _live_shape(replay) == _live_shape(live)
    assert all(shape[2].timeout_secs is None for shape in _shape(replay))


async def test_monitor_reads_recorded_funding_and_fear_greed_and_reasons_for_the_rest(
    feed: SimFeed,
) -> None:
    config = DerivativesConfig()
    for now_ms in (NOW_MS, 1_740_832_440_000, 1_766_000_000_000):
        clock = VirtualClock(now_ms)
        fields = build_recorded_context_fields(
            config, clock, TICKERS, feed, fng_book(), RecordedSpotKlines()
        )
        reading = await DerivativesMonitor(clock, EventBus(), fields, config=config).poll_once()

        expected = {}
        for ticker in TICKERS:
            funding = recorded_funding(ticker)
            expected[ticker] = float(funding[funding.index <= now_ms]["funding_rate"].iloc[-1])
        assert reading.values["funding_rates"] == pytest.approx(expected, abs=5e-9)

        days = recorded_fear_greed()
        if now_ms // 1000 < int(days.index[-1]) + 86_400:
            day = days[days.index <= now_ms // 1000].iloc[-1]
            fng = reading.values["fear_greed"]
            assert (fng["value"], fng["classification"]) == (
                int(day["value"]),
                day["classification"],
            )
            assert fng["timestamp_ms"] <= now_ms
        else:  # after 2025-06-26 the recording has no index: unavailable, with why
            assert "fear_greed" not in reading.values
            assert "no Fear & Greed value recorded" in reading.unavailable["fear_greed"]

        for name in (
            "open_interest",
            "taker_delta",
            "long_short_ratio",
            "basis",
            "liquidations",
            "stablecoin_supply",
            "news_summary",
            "etf_flow",
        ):
            assert name not in reading.values
            assert NOT_RECORDED in reading.unavailable[name], reading.unavailable[name]
        _check_recorded_paxg(reading.values["paxg"], now_ms)


def _check_recorded_paxg(paxg: dict[str, Any], now_ms: int) -> None:
    """The hedge field against the recorded CSVs, read here apart from the code under test:
    the newest candle closed at now gives the price, it and the one before it the return."""
    for timeframe, name in (("1h", "return_1h_pct"), ("4h", "return_4h_pct")):
        frame = pd.read_csv(f"data/binance-spot/PAXGUSDT-{timeframe}.csv.gz")
        closed = frame[frame["open_time_ms"] + TIMEFRAME_MS[timeframe] <= now_ms]["close"]
        assert paxg[name] == pytest.approx((closed.iloc[-1] / closed.iloc[-2] - 1) * 100)
        if timeframe == "1h":
            assert paxg["price"] == closed.iloc[-1]
    assert paxg["symbol"] == "PAXGUSDT" and paxg["price_at_ms"] < now_ms
