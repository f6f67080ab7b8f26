"""``market.history.extended``: the refresh's one-step merge gives the general merge's frame to the
bit whenever it answers, and answers for the refresh after a close (rows that only extend)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st
from property_budget import examples

from market.history import empty_ohlcv_frame, extended, rows_to_frame

H4 = 4 * 3_600_000
START_MS = 1_700_000_000_000 - 1_700_000_000_000 % H4


def _general(cached: pd.DataFrame, rows: list[list[Any]], window_start_ms: int) -> pd.DataFrame:
    """``OhlcvHistory._update``'s general merge."""
    fresh = rows_to_frame(rows)
    merged = pd.concat([cached, fresh]) if not cached.empty else fresh
    merged = merged[~merged.index.duplicated(keep="last")].sort_index()
    return merged[merged.index >= window_start_ms]


def _row(slot: int, price: float) -> list[Any]:
    return [START_MS + slot * H4, price, price * 1.01, price * 0.99, price * 1.001, 10.0 + slot]


def _same(a: pd.DataFrame, b: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    assert a.index.name == b.index.name and a.index.dtype == b.index.dtype
    assert list(a.columns) == list(b.columns) and a.columns.dtype == b.columns.dtype
    assert a.to_numpy().tobytes() == b.to_numpy().tobytes()


_prices = st.floats(min_value=0.01, max_value=1e6, allow_nan=False, allow_infinity=False)


@settings(max_examples=examples(120), deadline=None)
@given(
    cached_slots=st.lists(st.integers(0, 60), max_size=40, unique=True),
    new_slots=st.lists(st.integers(0, 80), max_size=6),
    price=_prices,
    window_slot=st.integers(-5, 90),
    hole=st.sampled_from([None, 0, 1]),
    impossible=st.sampled_from([None, 0, 2]),
)
def test_whenever_it_answers_it_is_the_general_merge(
    cached_slots: list[int],
    new_slots: list[int],
    price: float,
    window_slot: int,
    hole: int | None,
    impossible: int | None,
) -> None:
    """Cached frames with gaps; fetched rows that extend, overlap, repeat, go backwards, miss a
    value or cannot be a candle (a high under the low); any window start."""
    cached = _general(empty_ohlcv_frame(), [_row(s, price + s) for s in cached_slots], 0)
    rows = [_row(s, price * 1.5 + s) for s in new_slots]
    if hole is not None and hole < len(rows):
        rows[hole][3] = None
    if impossible is not None and impossible < len(rows):
        rows[impossible][2], rows[impossible][3] = rows[impossible][3], rows[impossible][2]
    window_start_ms = START_MS + window_slot * H4
    got = extended(cached, rows, window_start_ms)
    expected = _general(cached, rows, window_start_ms)
    if got is not None:
        _same(got, expected)
    complete = (hole is None or hole >= len(rows)) and (
        impossible is None or impossible >= len(rows)
    )
    ascending = new_slots == sorted(set(new_slots))
    newer = all(s > max(cached_slots, default=-1) for s in new_slots)
    if cached_slots and new_slots and complete and ascending and newer and len(expected):
        assert got is not None  # the refresh after a close takes the one-step merge


def test_the_refresh_after_a_close_is_one_new_row_and_a_slid_window() -> None:
    cached = rows_to_frame([_row(s, 100.0 + s) for s in range(1080)])
    rows = [_row(1080, 99.5)]
    window_start_ms = START_MS + 1 * H4  # the oldest candle leaves the window
    got = extended(cached, rows, window_start_ms)
    assert got is not None
    _same(got, _general(cached, rows, window_start_ms))
    assert len(got) == 1080 and int(got.index[-1]) == START_MS + 1080 * H4


def test_an_empty_cache_no_rows_or_malformed_rows_take_the_general_merge() -> None:
    assert extended(empty_ohlcv_frame(), [_row(0, 1.0)], 0) is None
    assert extended(rows_to_frame([_row(0, 1.0)]), [], 0) is None  # nothing new
    cached = rows_to_frame([_row(s, 50.0) for s in range(3)])
    assert extended(cached, [[START_MS + 3 * H4, 1.0, 2.0]], 0) is None  # a short row
    assert extended(cached, [[START_MS + 3 * H4, "x", 1, 1, 1, 1]], 0) is None
    unsorted = cached.iloc[::-1]
    assert extended(unsorted, [_row(5, 1.0)], 0) is None
    assert np.isnan(rows_to_frame([_row(0, 1.0)]).to_numpy()).sum() == 0
