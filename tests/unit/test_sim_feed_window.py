"""SimFeed on a window (replay's): inside it every answer is the whole recording's, outside it
there is none (never a wrapped-around row), and the arrays hold the window's rows only."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_budget import examples

from sim.feed import BAR_MS, SimFeed
from sim.tick_ahead import FeedSource

TICKER = "BTC/USDT"
DAY_MS = 86_400_000
ROW_MS = 4 * 3_600_000
MAR_1_2025_MS = 1_740_787_200_000
# mid-row on both sides: the kept rows reach past the window to whole 4h rows
WINDOW = (MAR_1_2025_MS + 7_300_000, MAR_1_2025_MS + 5 * DAY_MS + 3_100_000)
TIMEFRAMES = ("5m", "15m", "1h", "4h")
FAST = settings(
    max_examples=examples(80),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


@pytest.fixture(scope="module")
def feeds() -> tuple[SimFeed, SimFeed]:
    return SimFeed([TICKER], update_interval_ms=75_000), SimFeed(
        [TICKER], update_interval_ms=75_000, window=WINDOW
    )


def test_the_arrays_hold_the_windows_rows_only(feeds: tuple[SimFeed, SimFeed]) -> None:
    whole, windowed = feeds
    series = windowed._series[TICKER]
    first_row = WINDOW[0] - WINDOW[0] % ROW_MS
    assert series.base_ms == first_row
    assert series.base_ms + series.slots * BAR_MS == -(-WINDOW[1] // ROW_MS) * ROW_MS
    # what the whole recording says of itself is kept
    assert windowed.span_ms(TICKER) == whole.span_ms(TICKER)
    assert windowed.gaps(TICKER) == whole.gaps(TICKER)
    assert windowed.price_decimals(TICKER) == whole.price_decimals(TICKER)


@FAST
@given(tf=st.sampled_from(TIMEFRAMES), at=st.integers(WINDOW[0], WINDOW[1] - 1))
def test_inside_the_window_every_answer_is_the_recordings(
    feeds: tuple[SimFeed, SimFeed], tf: str, at: int
) -> None:
    whole, windowed = feeds
    assert windowed.kline_state(TICKER, tf, at) == whole.kline_state(TICKER, tf, at)
    assert windowed.has_price(TICKER, at) == whole.has_price(TICKER, at)
    since = max(WINDOW[0], at - DAY_MS)
    assert windowed.closed_candles(TICKER, tf, since, at, 50) == whole.closed_candles(
        TICKER, tf, since, at, 50
    )


@FAST
@given(before=st.integers(1, 30 * DAY_MS), tf=st.sampled_from(TIMEFRAMES))
def test_before_the_window_there_is_no_price(
    feeds: tuple[SimFeed, SimFeed], before: int, tf: str
) -> None:
    _, windowed = feeds
    at = WINDOW[0] - WINDOW[0] % ROW_MS - before
    assert windowed.kline_state(TICKER, tf, at) is None
    assert not windowed.has_price(TICKER, at)


def test_a_window_between_the_bars_keeps_none(feeds: tuple[SimFeed, SimFeed]) -> None:
    whole, _ = feeds
    first_ms, _ = whole.span_ms(TICKER)
    empty = SimFeed([TICKER], update_interval_ms=75_000, window=(0, first_ms - DAY_MS))
    assert empty._series[TICKER].slots == 0
    assert empty.kline_state(TICKER, "4h", first_ms) is None
    assert empty.closed_candles(TICKER, "1h", first_ms, first_ms + DAY_MS, 10) == []


def test_the_tick_worker_opens_the_same_window(feeds: tuple[SimFeed, SimFeed]) -> None:
    _, windowed = feeds
    reopened = FeedSource.of(windowed).open()
    assert reopened.window == WINDOW
    assert reopened._series[TICKER].slots == windowed._series[TICKER].slots
