"""The API's request ceiling: a token bucket of one second's burst, refilled at the rate."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from api.ratelimit import TokenBucket


class Clock:
    def __init__(self) -> None:
        self.secs = 100.0

    def __call__(self) -> float:
        return self.secs


def test_a_second_of_burst_then_the_rate() -> None:
    clock = Clock()
    bucket = TokenBucket(10, clock)
    assert [bucket.take() for _ in range(12)] == [True] * 10 + [False] * 2
    clock.secs += 0.25  # 2.5 tokens back
    assert [bucket.take() for _ in range(3)] == [True, True, False]
    assert bucket.refused == 3


def test_an_idle_hour_refills_one_second_only() -> None:
    clock = Clock()
    bucket = TokenBucket(5, clock)
    clock.secs += 3600
    assert sum(bucket.take() for _ in range(20)) == 5


def test_under_one_a_second_admits_one_at_a_time() -> None:
    clock = Clock()
    bucket = TokenBucket(0.5, clock)
    assert [bucket.take(), bucket.take()] == [True, False]
    clock.secs += 2
    assert bucket.take()


def test_a_rate_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        TokenBucket(0)


@given(
    rate=st.floats(0.5, 1000),
    gaps=st.lists(st.floats(0, 2), min_size=1, max_size=200),
)
def test_never_more_than_the_burst_plus_the_rate_over_the_elapsed_time(
    rate: float, gaps: list[float]
) -> None:
    clock = Clock()
    bucket = TokenBucket(rate, clock)
    answered = 0
    for gap in gaps:
        clock.secs += gap
        answered += bucket.take()
    assert answered <= max(1.0, rate) + rate * sum(gaps) + 1e-6
