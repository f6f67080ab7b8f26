"""SimFeed: the recorded market as a kline stream shows it at any instant, and nothing later."""

from __future__ import annotations

import gzip
import itertools
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_budget import examples

from market.recorded import DataUnavailableError, load_funding, load_klines, resample
from market.timeframes import TIMEFRAME_MS
from sim.feed import BAR_MS, FUNDING_INTERVAL_MS, KlineState, SimFeed
from sim.path import state_at

TIMEFRAMES = ("5m", "15m", "1h", "4h")
UPDATE_MS = 250
N = BAR_MS // UPDATE_MS
DAY_MS = 86_400_000
MAR_1_2025_MS = 1_740_787_200_000
# hypothesis examples here are cheap lookups; keep runs short and deterministic
FAST = settings(
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


@pytest.fixture(scope="module")
def feed() -> SimFeed:
    return SimFeed(["BTC/USDT"], update_interval_ms=UPDATE_MS)


@pytest.fixture(scope="module")
def bars() -> pd.DataFrame:
    return load_klines("BTC/USDT", "5m")


@pytest.fixture(scope="module")
def resampled(bars: pd.DataFrame) -> dict[str, pd.DataFrame]:
    return {tf: resample(bars, "5m", tf) for tf in TIMEFRAMES}


def _closing_instant(open_ms: int, timeframe: str) -> int:
    """When a candle's last update (index n-1 of its last 5m bar) is shown."""
    return open_ms + TIMEFRAME_MS[timeframe] - UPDATE_MS


# --- closing updates reproduce the recording exactly ---


@FAST
@given(tf=st.sampled_from(TIMEFRAMES), pick=st.floats(0, 1))
def test_closing_update_is_the_resampled_candle_exactly(
    feed: SimFeed, resampled: dict[str, pd.DataFrame], tf: str, pick: float
) -> None:
    candles = resampled[tf]
    row = min(int(pick * len(candles)), len(candles) - 1)
    open_ms = int(candles.index[row])
    state = feed.kline_state("BTC/USDT", tf, _closing_instant(open_ms, tf))
    expected = candles.iloc[row]
    assert state == KlineState(
        "BTC/USDT",
        tf,
        open_ms,
        open_ms + TIMEFRAME_MS[tf] - 1,
        expected["open"],
        expected["high"],
        expected["low"],
        expected["close"],
        expected["volume"],
        True,
    )


def test_every_4h_closing_update_of_a_week_matches(
    feed: SimFeed, resampled: dict[str, pd.DataFrame]
) -> None:
    week = resampled["4h"].loc[MAR_1_2025_MS : MAR_1_2025_MS + 7 * DAY_MS - 1]
    assert len(week) == 42
    for open_ms, row in zip(week.index.to_numpy().tolist(), week.to_numpy().tolist(), strict=True):
        state = feed.kline_state("BTC/USDT", "4h", _closing_instant(open_ms, "4h"))
        assert state is not None and state.closed
        assert [state.open, state.high, state.low, state.close, state.volume] == row


@FAST
@given(
    tf=st.sampled_from(TIMEFRAMES),
    candle=st.integers(0, 500),
    bar_pick=st.floats(0, 1),
    index=st.sampled_from([0, 1, N // 2, N - 2, N - 1]),
)
def test_only_the_last_update_of_a_candle_is_closed(
    feed: SimFeed, tf: str, candle: int, bar_pick: float, index: int
) -> None:
    bars_per_candle = TIMEFRAME_MS[tf] // BAR_MS
    bar = min(int(bar_pick * bars_per_candle), bars_per_candle - 1)
    open_ms = MAR_1_2025_MS + candle * TIMEFRAME_MS[tf]
    now = open_ms + bar * BAR_MS + index * UPDATE_MS
    state = feed.kline_state("BTC/USDT", tf, now)
    assert state is not None and state.open_time_ms == open_ms
    assert state.closed == (bar == bars_per_candle - 1 and index == N - 1)
    assert state.closed == (now == _closing_instant(open_ms, tf))


# --- partial candles: completed bars + the current bar's path state ---


@FAST
@given(tf=st.sampled_from(TIMEFRAMES), at=st.integers(0, 30 * DAY_MS))
def test_partial_candle_is_completed_bars_plus_current_bar_state(
    feed: SimFeed, bars: pd.DataFrame, tf: str, at: int
) -> None:
    now = MAR_1_2025_MS + at
    tf_ms = TIMEFRAME_MS[tf]
    candle_open = now - now % tf_ms
    bar_open = now - now % BAR_MS
    done = bars.loc[candle_open : bar_open - 1]
    current = bars.loc[bar_open, ["open", "high", "low", "close", "volume"]].to_numpy()
    o, h, low, c, v = (float(x) for x in current)
    index = (now - bar_open) // UPDATE_MS
    bar = state_at(o, h, low, c, v, index, N)
    state = feed.kline_state("BTC/USDT", tf, now)
    assert state is not None
    assert state.open_time_ms == candle_open
    assert state.close_time_ms == candle_open + tf_ms - 1
    assert state.open == (done.iloc[0].open if len(done) else o)
    assert state.high == max([bar.high, *done.high])
    assert state.low == min([bar.low, *done.low])
    assert state.close == bar.price
    if not state.closed:
        assert state.volume == pytest.approx(done.volume.sum() + bar.volume, rel=1e-12)


@FAST
@given(tf=st.sampled_from(("15m", "1h")), start=st.integers(0, 10 * DAY_MS))
def test_within_a_candle_extremes_widen_and_volume_grows(
    feed: SimFeed, tf: str, start: int
) -> None:
    candle_open = MAR_1_2025_MS + start - (MAR_1_2025_MS + start) % TIMEFRAME_MS[tf]
    states = [
        feed.kline_state("BTC/USDT", tf, t)
        for t in range(candle_open, candle_open + TIMEFRAME_MS[tf], 15 * UPDATE_MS)
    ]
    assert all(s is not None for s in states)
    for before, after in itertools.pairwise(states):
        assert before is not None and after is not None
        assert after.open == before.open
        assert after.high >= before.high and after.low <= before.low
        assert after.volume >= before.volume
        assert after.low <= after.close <= after.high


def test_bar_open_update_shows_the_recorded_open(feed: SimFeed, bars: pd.DataFrame) -> None:
    state = feed.kline_state("BTC/USDT", "5m", MAR_1_2025_MS)
    row = bars.loc[MAR_1_2025_MS]
    assert state is not None
    assert (state.open, state.close, state.high, state.low) == (row.open,) * 4
    assert state.volume == pytest.approx(row.volume / N)


# --- outside the recording, unknown inputs ---


def test_nothing_outside_the_recording(feed: SimFeed) -> None:
    first, last = feed.span_ms("BTC/USDT")
    assert feed.kline_state("BTC/USDT", "5m", first - 1) is None
    assert feed.kline_state("BTC/USDT", "1h", last + 1) is None
    assert feed.kline_state("BTC/USDT", "5m", last) is not None
    assert feed.last_price("BTC/USDT", first - 1) is None
    assert feed.kline_state("BTC/USDT", "5m", first) is not None


def test_span_is_first_open_to_last_close(feed: SimFeed, bars: pd.DataFrame) -> None:
    assert feed.span_ms("BTC/USDT") == (int(bars.index[0]), int(bars.index[-1]) + BAR_MS - 1)


def test_unknown_ticker_and_timeframe_are_refused(feed: SimFeed) -> None:
    with pytest.raises(DataUnavailableError, match="DOGE/USDT"):
        feed.kline_state("DOGE/USDT", "5m", MAR_1_2025_MS)
    with pytest.raises(ValueError, match="1d"):
        feed.kline_state("BTC/USDT", "1d", MAR_1_2025_MS)


@pytest.mark.parametrize("interval_ms", [0, 7, 100_000, 300_001])
def test_update_interval_must_split_a_bar_into_at_least_four(interval_ms: int) -> None:
    with pytest.raises(ValueError, match="update_interval_ms"):
        SimFeed(["BTC/USDT"], update_interval_ms=interval_ms)


def test_precision_comes_from_the_recording(feed: SimFeed) -> None:
    assert feed.price_decimals("BTC/USDT") == 1  # BTCUSDT perpetual tick 0.1
    assert feed.quantity_decimals("BTC/USDT") == 3  # step 0.001


def test_last_price_is_the_5m_stream_close(feed: SimFeed) -> None:
    now = MAR_1_2025_MS + 123_456
    state = feed.kline_state("BTC/USDT", "5m", now)
    assert state is not None and feed.last_price("BTC/USDT", now) == state.close


# --- closed candles (what REST klines serve) ---


def test_closed_candles_end_at_the_bound_and_are_complete(
    feed: SimFeed, resampled: dict[str, pd.DataFrame]
) -> None:
    now = MAR_1_2025_MS + 5 * 3_600_000 + 1234  # 05:00:01.234
    candles = feed.closed_candles("BTC/USDT", "1h", None, now, 3)
    assert [c.open_time_ms for c in candles] == [MAR_1_2025_MS + h * 3_600_000 for h in (2, 3, 4)]
    assert all(c.closed and c.close_time_ms <= now for c in candles)
    expected = resampled["1h"].loc[candles[0].open_time_ms]
    assert (candles[0].open, candles[0].high, candles[0].low, candles[0].close) == tuple(
        expected[["open", "high", "low", "close"]]
    )
    assert candles[0].volume == expected.volume


def test_closed_candles_exclude_the_candle_still_open(feed: SimFeed) -> None:
    close_time = MAR_1_2025_MS + 3_600_000 - 1
    assert feed.closed_candles("BTC/USDT", "1h", MAR_1_2025_MS, close_time - 1, 10) == []
    got = feed.closed_candles("BTC/USDT", "1h", MAR_1_2025_MS, close_time, 10)
    assert [c.open_time_ms for c in got] == [MAR_1_2025_MS]


def test_closed_candles_with_start_take_the_first_limit(feed: SimFeed) -> None:
    got = feed.closed_candles("BTC/USDT", "15m", MAR_1_2025_MS + 1, MAR_1_2025_MS + DAY_MS, 4)
    step = TIMEFRAME_MS["15m"]
    assert [c.open_time_ms for c in got] == [MAR_1_2025_MS + k * step for k in (1, 2, 3, 4)]
    assert feed.closed_candles("BTC/USDT", "15m", MAR_1_2025_MS, MAR_1_2025_MS + DAY_MS, 0) == []


# --- funding ---


def test_funding_is_the_latest_recorded_at_or_before_now(feed: SimFeed) -> None:
    funding = load_funding("BTC/USDT")
    times = funding.index.to_numpy()[100:110].tolist()
    rates = funding["funding_rate"].to_numpy()[100:110].tolist()
    for time_ms, rate in zip(times, rates, strict=True):
        assert feed.funding_rate_at("BTC/USDT", time_ms) == (time_ms, rate)
        got = feed.funding_rate_at("BTC/USDT", time_ms + FUNDING_INTERVAL_MS - 1)
        assert got == (time_ms, rate)
    first = int(funding.index[0])
    assert feed.funding_rate_at("BTC/USDT", first - 1) is None


@given(now=st.integers(0, 2**42))
def test_next_funding_is_the_next_8h_boundary(now: int) -> None:
    nxt = SimFeed.next_funding_time_ms(now)
    assert nxt > now and nxt - now <= FUNDING_INTERVAL_MS and nxt % FUNDING_INTERVAL_MS == 0


# --- nothing from the future leaks: changing the future changes nothing now ---

SYNTH_START_MS = 1_700_006_400_000  # a 4h boundary
SYNTH_BARS = 3 * 288  # three days


def _write_recording(root: Path, frame: pd.DataFrame, funding: pd.DataFrame) -> Path:
    folder = root / "binance-usdm"
    folder.mkdir(parents=True)
    with gzip.open(folder / "BTCUSDT-5m.csv.gz", "wt") as out:
        frame.to_csv(out, index_label="open_time_ms")
    with gzip.open(folder / "BTCUSDT-funding.csv.gz", "wt") as out:
        funding.to_csv(out, index_label="funding_time_ms")
    return root


def _synthetic(seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    close = 100 + np.cumsum(rng.normal(0, 0.5, SYNTH_BARS)).round(1)
    open_ = np.concatenate([[100.0], close[:-1]])
    high = np.maximum(open_, close) + rng.uniform(0, 1, SYNTH_BARS).round(1)
    low = np.minimum(open_, close) - rng.uniform(0, 1, SYNTH_BARS).round(1)
    volume = rng.uniform(1, 50, SYNTH_BARS).round(3)
    index = SYNTH_START_MS + BAR_MS * np.arange(SYNTH_BARS, dtype=np.int64)
    frame = pd.DataFrame(
        {"open": open_, "high": high, "low": low, "close": close, "volume": volume}, index=index
    )
    times = SYNTH_START_MS + FUNDING_INTERVAL_MS * np.arange(9, dtype=np.int64)
    funding = pd.DataFrame({"funding_rate": rng.normal(0, 1e-4, 9)}, index=times)
    return frame, funding


@pytest.fixture(scope="module")
def twin_feeds(tmp_path_factory: pytest.TempPathFactory) -> tuple[SimFeed, SimFeed, int]:
    """Two recordings identical up to a cut instant, different after it."""
    frame, funding = _synthetic(7)
    cut_ms = SYNTH_START_MS + 37 * 3_600_000 + 20 * 60_000  # mid-candle for every timeframe
    other, other_funding = _synthetic(8)
    changed = frame.copy()
    changed.loc[changed.index >= cut_ms] = other.loc[other.index >= cut_ms]
    changed_funding = funding.copy()
    changed_funding.loc[changed_funding.index > cut_ms] = other_funding.loc[
        other_funding.index > cut_ms
    ]
    a = _write_recording(tmp_path_factory.mktemp("a"), frame, funding)
    b = _write_recording(tmp_path_factory.mktemp("b"), changed, changed_funding)
    return (
        SimFeed(["BTC/USDT"], data_dir=a, update_interval_ms=UPDATE_MS),
        SimFeed(["BTC/USDT"], data_dir=b, update_interval_ms=UPDATE_MS),
        cut_ms,
    )


@FAST
@given(tf=st.sampled_from(TIMEFRAMES), before=st.integers(1, 40 * 3_600_000))
def test_a_different_future_does_not_change_the_present(
    twin_feeds: tuple[SimFeed, SimFeed, int], tf: str, before: int
) -> None:
    feed, changed, cut_ms = twin_feeds
    now = max(SYNTH_START_MS, cut_ms - before)
    assert feed.kline_state("BTC/USDT", tf, now) == changed.kline_state("BTC/USDT", tf, now)
    assert feed.funding_rate_at("BTC/USDT", now) == changed.funding_rate_at("BTC/USDT", now)
    assert feed.closed_candles("BTC/USDT", tf, None, now, 50) == changed.closed_candles(
        "BTC/USDT", tf, None, now, 50
    )


def test_the_twin_recordings_really_differ_after_the_cut(
    twin_feeds: tuple[SimFeed, SimFeed, int],
) -> None:
    feed, changed, cut_ms = twin_feeds
    assert feed.kline_state("BTC/USDT", "5m", cut_ms) != changed.kline_state(
        "BTC/USDT", "5m", cut_ms
    )
    # the 4h candle containing the cut existed before it; only its later updates differ
    late = cut_ms + 3_600_000
    assert feed.kline_state("BTC/USDT", "4h", late) != changed.kline_state("BTC/USDT", "4h", late)


# --- holes in a recording are never papered over ---


def test_a_missing_bar_silences_its_candles(tmp_path: Path) -> None:
    frame, funding = _synthetic(3)
    hole_ms = SYNTH_START_MS + 3_600_000 + 2 * BAR_MS  # third bar of the 01:00 hour
    root = _write_recording(tmp_path, frame.drop(index=hole_ms), funding)
    feed = SimFeed(["BTC/USDT"], data_dir=root, update_interval_ms=UPDATE_MS)
    assert feed.kline_state("BTC/USDT", "5m", hole_ms + 1000) is None
    assert feed.kline_state("BTC/USDT", "5m", hole_ms + BAR_MS) is not None
    assert feed.kline_state("BTC/USDT", "1h", hole_ms - BAR_MS) is not None  # before the hole
    assert feed.kline_state("BTC/USDT", "1h", hole_ms + BAR_MS) is None  # after it, same hour
    assert feed.kline_state("BTC/USDT", "4h", hole_ms + 2 * BAR_MS) is None
    hours = feed.closed_candles("BTC/USDT", "1h", SYNTH_START_MS, SYNTH_START_MS + DAY_MS, 24)
    assert SYNTH_START_MS + 3_600_000 not in [c.open_time_ms for c in hours]
    assert len(hours) == 23


def test_the_base_bars_closed_candles_are_the_recorded_rows_around_a_hole(tmp_path: Path) -> None:
    """The base timeframe is served from the bars themselves (no copy when there is no hole, a
    gathered copy when there is one): either way the recorded rows, and nothing in the hole."""
    frame, funding = _synthetic(4)
    hole_ms = SYNTH_START_MS + 5 * BAR_MS
    holed = frame.drop(index=hole_ms)
    for recorded, root in (
        (frame, _write_recording(tmp_path / "whole", frame, funding)),
        (holed, _write_recording(tmp_path / "holed", holed, funding)),
    ):
        feed = SimFeed(["BTC/USDT"], data_dir=root, update_interval_ms=UPDATE_MS)
        got = feed.closed_candles("BTC/USDT", "5m", SYNTH_START_MS, SYNTH_START_MS + DAY_MS, 300)
        expected = recorded[recorded.index + BAR_MS - 1 <= SYNTH_START_MS + DAY_MS]
        assert [c.open_time_ms for c in got] == list(expected.index)
        assert [(c.open, c.high, c.low, c.close, c.volume) for c in got] == list(
            expected[["open", "high", "low", "close", "volume"]].itertuples(index=False, name=None)
        )
        closing = feed.kline_state("BTC/USDT", "5m", SYNTH_START_MS + 7 * BAR_MS - UPDATE_MS)
        assert closing is not None and closing.closed
        assert closing.volume == recorded.loc[SYNTH_START_MS + 6 * BAR_MS, "volume"]


@FAST
@given(
    instants=st.lists(
        st.tuples(st.integers(0, 3 * N - 1), st.sampled_from(TIMEFRAMES), st.integers(0, 2)),
        min_size=1,
        max_size=40,
    )
)
def test_the_bar_memo_never_changes_an_answer(
    feed: SimFeed, instants: list[tuple[int, str, int]]
) -> None:
    """Timeframes of one instant share the walked base bar; any order of lookups (the same
    instant again, another timeframe, another bar) answers as a lookup with no memo."""
    for update, timeframe, bar in instants:
        now_ms = MAR_1_2025_MS + bar * BAR_MS + update % N * UPDATE_MS
        memoised = feed.kline_state("BTC/USDT", timeframe, now_ms)
        feed._get("BTC/USDT").bar_memo = None
        assert memoised == feed.kline_state("BTC/USDT", timeframe, now_ms)
