"""The intra-bar price path: updates reproduce the recorded bar exactly, extremes only grow."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st
from property_budget import examples

from sim.path import MIN_UPDATES_PER_BAR, BarState, price_at, state_at, vertex_indices

_price = st.floats(min_value=1e-8, max_value=1e7, allow_nan=False, allow_infinity=False)
_fraction = st.floats(min_value=0.0, max_value=1.0)
_volume = st.floats(min_value=0.0, max_value=1e12, allow_nan=False, allow_infinity=False)


@st.composite
def bars(draw: st.DrawFn) -> tuple[float, float, float, float, float]:
    """(open, high, low, close, volume) with 0 < low <= open, close <= high."""
    a, b = draw(_price), draw(_price)
    low, high = min(a, b), max(a, b)
    # open and close anywhere in the range, often exactly on an extreme
    edge = st.sampled_from([low, high])
    inside = _fraction.map(lambda f: min(high, max(low, low + (high - low) * f)))
    open_ = draw(st.one_of(edge, inside))
    close = draw(st.one_of(edge, inside, st.just(open_)))
    return open_, high, low, close, draw(_volume)


def _walk(bar: tuple[float, float, float, float, float], n: int) -> list[BarState]:
    open_, high, low, close, volume = bar
    return [state_at(open_, high, low, close, volume, i, n) for i in range(n)]


@settings(max_examples=examples(300), deadline=None)
@given(bar=bars(), n=st.integers(min_value=MIN_UPDATES_PER_BAR, max_value=1200))
@example(bar=(100.0, 100.0, 100.0, 100.0, 0.0), n=4)  # a flat bar with no trades
@example(bar=(0.1, 0.30000000000000004, 0.1, 0.2, 3.0), n=1200)
@example(bar=(1e-8, 1e7, 1e-8, 1e7, 1e12), n=7)
def test_updates_reproduce_the_bar_exactly(
    bar: tuple[float, float, float, float, float], n: int
) -> None:
    open_, high, low, close, volume = bar
    states = _walk(bar, n)
    prices = [s.price for s in states]
    assert prices[0] == open_
    assert prices[-1] == close
    assert max(prices) == high
    assert min(prices) == low
    last = states[-1]
    assert (last.high, last.low, last.volume) == (high, low, volume)


@settings(max_examples=examples(300), deadline=None)
@given(bar=bars(), n=st.integers(min_value=MIN_UPDATES_PER_BAR, max_value=1200))
def test_running_extremes_and_volume_only_grow(
    bar: tuple[float, float, float, float, float], n: int
) -> None:
    _, high, low, _, volume = bar
    states = _walk(bar, n)
    seen_high = seen_low = states[0].price
    for before, after in itertools.pairwise(states):
        assert after.high >= before.high
        assert after.low <= before.low
        assert after.volume >= before.volume
    for s in states:
        seen_high, seen_low = max(seen_high, s.price), min(seen_low, s.price)
        # the running extremes are exactly what has been visited so far, never a peek ahead
        assert (s.high, s.low) == (seen_high, seen_low)
        assert low <= s.low <= s.price <= s.high <= high
        assert 0.0 <= s.volume <= volume


@given(bar=bars())
def test_a_rising_bar_dips_first_and_a_falling_bar_rallies_first(
    bar: tuple[float, float, float, float, float],
) -> None:
    open_, high, low, close, _ = bar
    assume(low < high)
    _, first_vertex, second_vertex, _ = vertex_indices(10)
    first = price_at(open_, high, low, close, first_vertex, 10)
    second = price_at(open_, high, low, close, second_vertex, 10)
    if close >= open_:
        assert (first, second) == (low, high)
    else:
        assert (first, second) == (high, low)


def test_vertices_land_on_distinct_updates() -> None:
    for n in range(MIN_UPDATES_PER_BAR, 1201):
        marks = vertex_indices(n)
        assert marks[0] == 0
        assert marks[-1] == n - 1
        assert list(marks) == sorted(set(marks))


def test_volume_accrues_linearly() -> None:
    vols = [state_at(10.0, 12.0, 9.0, 11.0, 100.0, i, 4).volume for i in range(4)]
    assert vols == [25.0, 50.0, 75.0, 100.0]


@pytest.mark.parametrize("n", [-1, 0, 1, 2, 3])
def test_fewer_than_four_updates_per_bar_are_rejected(n: int) -> None:
    with pytest.raises(ValueError, match="update"):
        state_at(10.0, 12.0, 9.0, 11.0, 5.0, 0, n)
    if n >= 1:
        with pytest.raises(ValueError, match="at least 4"):
            vertex_indices(n)


@pytest.mark.parametrize("index", [-1, 4, 100])
def test_an_update_index_outside_the_bar_is_rejected(index: int) -> None:
    with pytest.raises(ValueError, match="outside"):
        state_at(10.0, 12.0, 9.0, 11.0, 5.0, index, 4)
