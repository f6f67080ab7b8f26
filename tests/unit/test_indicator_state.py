"""IndicatorState (close by close) against the batch helpers of agent.indicators (whole series),
and the snapshot builder's per-series feeding of it."""

from __future__ import annotations

import indicator_series as ref
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from property_budget import examples

from agent import indicators as ind
from agent.indicator_state import IndicatorState
from agent.snapshot_builder import _SeriesIndicators
from market.aggregator import CandleArrays

#: the recurrence and the closed form differ by float rounding only
RTOL = 1e-9

#: random walks in log space, with flat stretches (zero changes) and big jumps
moves = st.one_of(
    st.floats(min_value=-0.25, max_value=0.25, allow_nan=False),
    st.just(0.0),
)
price_paths = st.lists(moves, min_size=0, max_size=260).map(
    lambda steps: (250.0 * np.exp(np.cumsum([0.0, *steps]))).tolist()
)


def _same(incremental: float | None, batch: float | None) -> None:
    if batch is None:
        assert incremental is None
    else:
        assert incremental == pytest.approx(batch, rel=RTOL, abs=1e-9)


@settings(max_examples=examples(200), deadline=None)
@given(
    closes=price_paths,
    rsi_window=st.integers(min_value=1, max_value=30),
    fast=st.integers(min_value=1, max_value=20),
    slow=st.integers(min_value=21, max_value=60),
    band=st.integers(min_value=1, max_value=30),
    roc=st.integers(min_value=1, max_value=29),
)
def test_incremental_equals_batch_after_every_close(
    closes: list[float], rsi_window: int, fast: int, slow: int, band: int, roc: int
) -> None:
    state = IndicatorState(rsi_window=rsi_window, ema_windows=(fast, slow), capacity=30)
    for end in range(1, len(closes) + 1):
        state.push(closes[end - 1])
        upto = np.asarray(closes[:end])
        _same(state.rsi(), ind.rsi_last(upto, rsi_window))
        _same(state.ema(fast), ref.ema_last(upto, fast))
        _same(state.ema(slow), ref.ema_last(upto, slow))
        _same(state.rate_of_change_pct(roc), ind.rate_of_change_last_pct(upto, roc))
        bands, batch = state.bollinger(band), ind.bollinger_last(upto, band)
        if batch is None:
            assert bands is None
            continue
        # the same numpy reductions on the same closes: bit for bit
        assert bands == batch
    assert state.count == len(closes)


@settings(max_examples=examples(100), deadline=None)
@given(closes=price_paths)
def test_summary_equals_the_batch_summary(closes: list[float]) -> None:
    state = IndicatorState.of(closes)
    got, want = state.summary(), ref.summarise_closes(closes)
    assert got.unavailable == want.unavailable
    assert got.bollinger_position == want.bollinger_position
    _same(got.rsi, want.rsi)
    if want.trend is not None:
        # a label from a threshold: equal unless the spread sits within rounding of the band
        fast, slow = ref.ema_last(closes, 20), ref.ema_last(closes, 50)
        assert fast is not None and slow is not None
        spread = (fast / slow - 1.0) * 100.0
        if abs(abs(spread) - ind.TREND_FLAT_BAND_PCT) > 1e-9:
            assert got.trend == want.trend
    else:
        assert got.trend is None


def test_readers_refuse_what_the_state_does_not_keep() -> None:
    state = IndicatorState.of([1.0, 2.0, 3.0], capacity=3)
    with pytest.raises(ValueError, match="no EMA of 7"):
        state.ema(7)
    with pytest.raises(ValueError, match="over the ring"):
        state.bollinger(4)
    with pytest.raises(ValueError, match="needs a ring of 4"):
        state.rate_of_change_pct(3)
    with pytest.raises(ValueError, match=">= 1"):
        IndicatorState(capacity=0)
    assert state.tail(3).tolist() == [1.0, 2.0, 3.0]
    state.push(4.0)  # the ring wraps: still the newest three, oldest first
    assert state.tail(3).tolist() == [2.0, 3.0, 4.0]
    assert state.tail(2).tolist() == [3.0, 4.0]


def _arrays(opens_ms: list[int], closes: list[float]) -> CandleArrays:
    ones = np.ones(len(closes))
    column = np.asarray(closes, dtype=np.float64)
    return CandleArrays(np.asarray(opens_ms, dtype=np.int64), column, column, column, column, ones)


def test_series_feeding_follows_appends_slides_and_corrections() -> None:
    """What the aggregator hands out: a growing window, then a sliding one, and a corrected
    newest close; each summary equals the batch summary of the closes seen since the start."""
    rng = np.random.default_rng(7)
    closes = (100.0 * np.exp(np.cumsum(rng.normal(0.0, 0.01, 400)))).tolist()
    opens = [i * 900_000 for i in range(len(closes))]
    series = _SeriesIndicators()
    window = 120  # the aggregator keeps the newest N closes
    for end in (1, 10, 60, 61, 150, 250, 251, 360, 400):
        start = max(0, end - window)
        arrays = _arrays(opens[start:end], closes[start:end])
        got = series.summary(arrays)
        assert series.summary(arrays) is got  # same arrays object: nothing recomputed
        want = ref.summarise_closes(closes[:end])
        assert got.unavailable == want.unavailable
        assert got.bollinger_position == want.bollinger_position
        _same(got.rsi, want.rsi)
        assert got.trend == want.trend
    corrected = [*closes[280:399], closes[399] * 1.05]  # the newest close says something else
    got = series.summary(_arrays(opens[280:400], corrected))
    want = ref.summarise_closes(corrected)  # started over on the arrays it was given
    assert got.bollinger_position == want.bollinger_position
    _same(got.rsi, want.rsi)
    # more new closes than the window holds: the last one folded in is gone, so it starts over
    skipped = _SeriesIndicators()
    skipped.summary(_arrays(opens[:50], closes[:50]))
    got = skipped.summary(_arrays(opens[200:320], closes[200:320]))
    want = ref.summarise_closes(closes[200:320])
    _same(got.rsi, want.rsi)
    assert got.bollinger_position == want.bollinger_position
    empty = series.summary(_arrays([], []))
    assert empty.unavailable["rsi"] == "needs 15 closes, have 0"


_any_float = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 5e-324, 1e-300, 1e300, 1.0, -1.0]),
)


@settings(max_examples=examples(500), deadline=None)
@given(_any_float, _any_float)
def test_the_rsi_of_one_pair_is_the_arrays_rsi_bit_for_bit(gain: float, loss: float) -> None:
    with np.errstate(over="ignore"):  # an overflow is an infinity in both
        want = float(ind.rsi_from_averages(np.array([gain]), np.array([loss]))[0])
    got = ind.rsi_from_average_pair(gain, loss)
    assert np.isnan(got) if np.isnan(want) else got.hex() == want.hex()


def _hex_or_nan(value: float) -> str:
    return "nan" if np.isnan(value) else value.hex()


@settings(max_examples=examples(500), deadline=None)
@given(
    st.lists(_any_float, min_size=1, max_size=200),
    st.integers(min_value=0, max_value=3),
)
def test_mean_std_is_numpys_mean_and_std_bit_for_bit(values: list[float], offset: int) -> None:
    """Any floats (signed zeros, subnormals, overflow, infinities, NaN), any length (numpy's
    pairwise sum changes its blocking at 8 and 128), and views that start inside an array."""
    array = np.array([1.0] * offset + values, dtype=np.float64)[offset:]
    with np.errstate(all="ignore"):  # an overflow or a NaN warns in both
        want = (float(array.mean()), float(array.std(ddof=0)))
        got = ind.mean_std(array)
    assert [_hex_or_nan(v) for v in got] == [_hex_or_nan(v) for v in want]
