"""``make_tick`` sets a ``MarketTick`` up without validating it field by field: for every row
``kline_row`` can give, the tick must be the one pydantic's validation builds from the same values
(same values of the same types, same bookkeeping, and it copies, pickles and refuses changes
alike)."""

from __future__ import annotations

import math
import pickle
from typing import Any, get_args

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from model_support import assert_made_as_validated
from property_budget import examples
from pydantic import ValidationError

from core.events import MarketTick
from sim.feed import KlineState
from sim.tick_rows import kline_row, make_tick
from sim.ws_streams import KlineFormat

TIMEFRAMES: tuple[str, ...] = get_args(MarketTick.model_fields["timeframe"].annotation)

wide_floats = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, math.nan, math.inf, -math.inf, 1e-12, 1e300, 84_000.12]),
)
times_ms = st.integers(min_value=-(2**62), max_value=2**62)


def validated(ticker: str, timeframe: str, row: Any, event_ms: int) -> MarketTick:
    open_ms, close_ms, o, h, low, c, v, closed = row
    return MarketTick.model_validate(
        {
            "ticker": ticker,
            "timeframe": timeframe,
            "open_time_ms": open_ms,
            "close_time_ms": close_ms,
            "open": o,
            "high": h,
            "low": low,
            "close": c,
            "volume": v,
            "closed": closed,
            "event_time_ms": event_ms,
        }
    )


def state(
    open_ms: int, close_ms: int, ohlcv: tuple[float, float, float, float, float], closed: bool
) -> KlineState:
    return KlineState("BTC/USDT", "15m", open_ms, close_ms, *ohlcv, closed)


@settings(max_examples=examples(300), deadline=None)
@given(
    ticker=st.text(max_size=12),
    timeframe=st.sampled_from(TIMEFRAMES),
    open_ms=times_ms,
    close_ms=times_ms,
    ohlcv=st.tuples(wide_floats, wide_floats, wide_floats, wide_floats, wide_floats),
    closed=st.booleans(),
    event_ms=times_ms,
    decimals=st.integers(min_value=0, max_value=8),
)
def test_make_tick_is_the_validated_tick(
    ticker: str,
    timeframe: str,
    open_ms: int,
    close_ms: int,
    ohlcv: tuple[float, float, float, float, float],
    closed: bool,
    event_ms: int,
    decimals: int,
) -> None:
    fmt = KlineFormat(f"%.{decimals}f", f"%.{8 - decimals}f")
    row = kline_row(state(open_ms, close_ms, ohlcv, closed), fmt)
    assert_made_as_validated(
        make_tick(ticker, timeframe, row, event_ms),
        validated(ticker, timeframe, row, event_ms),
        MarketTick,
    )


ROW = (
    1_740_787_200_000,
    1_740_788_099_999,
    84_000.12,
    84_100.5,
    83_900.0,
    84_050.25,
    12.345,
    False,
)


def test_the_tick_copies_pickles_hashes_and_refuses_changes_like_a_validated_one() -> None:
    flat = [None, *ROW, None]  # a row as ``_publish_all`` hands it: a slice of the flat list
    got = make_tick("ETH/USDT", "1h", flat[1:9], 1_740_787_275_000)
    want = validated("ETH/USDT", "1h", ROW, 1_740_787_275_000)
    assert_made_as_validated(got, want, MarketTick)
    assert got == want and hash(got) == hash(want)
    assert_made_as_validated(pickle.loads(pickle.dumps(got)), want, MarketTick)
    assert_made_as_validated(
        got.model_copy(update={"close": 1.0}), want.model_copy(update={"close": 1.0}), MarketTick
    )
    assert_made_as_validated(got.model_copy(deep=True), want.model_copy(deep=True), MarketTick)
    with pytest.raises(ValidationError):
        got.close = 1.0  # type: ignore[misc]
    # each tick has its own fields-set (a copy with an update adds to it), equal to its
    # fields'. Not in any one iteration order: a set's order follows the string hashes of the
    # process (PYTHONHASHSEED) and how the set was built, validated or not, and nothing reads it
    assert got.model_fields_set is not make_tick("ETH/USDT", "1h", ROW, 0).model_fields_set
    assert got.model_fields_set == set(vars(got)) == want.model_fields_set


def test_kline_row_hands_make_tick_plain_ints_and_bools() -> None:
    """Numbers read from numpy arrays become the Python types validation would have made."""
    numpy_state = KlineState(
        "SOL/USDT",
        "4h",
        np.int64(ROW[0]),  # type: ignore[arg-type]
        np.int64(ROW[1]),  # type: ignore[arg-type]
        np.float64(ROW[2]),
        np.float64(ROW[3]),
        np.float64(ROW[4]),
        np.float64(ROW[5]),
        np.float64(ROW[6]),
        np.bool_(True),  # type: ignore[arg-type]
    )
    row = kline_row(numpy_state, KlineFormat("%.2f", "%.3f"))
    assert [type(value) for value in row] == [int, int, float, float, float, float, float, bool]
    expected = validated("SOL/USDT", "4h", (*ROW[:7], True), 5)
    assert_made_as_validated(make_tick("SOL/USDT", "4h", row, 5), expected, MarketTick)


def test_a_timeframe_outside_the_model_is_refused_as_validation_refuses_it() -> None:
    with pytest.raises(ValidationError):
        validated("BTC/USDT", "1m", ROW, 0)
    with pytest.raises(ValueError, match="1m"):
        make_tick("BTC/USDT", "1m", ROW, 0)
