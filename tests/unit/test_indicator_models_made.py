"""The snapshot's indicator models made without validation when their values are of their types
already are the models validation makes of the same values: ``TimeframeSummary`` and
``BollingerLast`` (each close's summary). Floats of every kind (NaN, infinities, signed zeros),
None, and the values validation converts (ints, numpy floats and strs), which take the validated
path."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from model_support import assert_made_as_validated
from property_budget import examples

from agent.indicator_state import IndicatorState
from agent.indicators import BollingerLast, TimeframeSummary, bollinger_last, timeframe_summary
from core.unvalidated import unvalidated

_maybe_float = st.one_of(
    st.none(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0]),
    st.integers(-100, 100),
    st.floats(0.0, 100.0).map(np.float64),
)


@settings(max_examples=examples(1500), deadline=None)
@given(
    have=st.integers(0, 100),
    trend=st.sampled_from([None, "up", "down", "flat", np.str_("up")]),
    banded=st.booleans(),
    position=_maybe_float,
    rsi=_maybe_float,
)
def test_a_summary_made_is_the_summary_validated(
    have: int, trend: Any, banded: bool, position: Any, rsi: Any
) -> None:
    """``timeframe_summary`` (each close's summary) against validating the same fields; the
    bands are made as they are to hand it a %B of any type."""
    fields = {"middle": 1.0, "upper": 2.0, "lower": 0.0, "percent_b": position}
    bands = unvalidated(BollingerLast, fields) if banded else None
    got = timeframe_summary(have, trend, bands, rsi)
    want = TimeframeSummary(
        trend=trend,
        bollinger_position=position if banded else None,
        rsi=rsi,
        unavailable=dict(got.unavailable),  # the reasons, not what is made of them, are others'
    )
    assert_made_as_validated(got, want, TimeframeSummary)


@settings(max_examples=examples(500), deadline=None)
@given(
    closes=st.lists(st.floats(1e-3, 1e6), min_size=20, max_size=40),
    num_std=st.one_of(st.floats(0.0, 4.0), st.integers(0, 4), st.floats(0.0, 4.0).map(np.float64)),
)
def test_the_bands_made_are_the_bands_validated(closes: list[float], num_std: Any) -> None:
    """``IndicatorState.bollinger`` against validating the bands it computes (flat windows too)."""
    state = IndicatorState.of(closes)
    got = state.bollinger(num_std=num_std)
    assert got is not None
    assert_made_as_validated(got, BollingerLast(**got.__dict__), BollingerLast)
    batch = bollinger_last(closes, num_std=num_std)
    assert batch is not None
    assert_made_as_validated(got, batch, BollingerLast)
