"""Capped, jittered exponential backoff (a pure function)."""

from __future__ import annotations

import asyncio
import math
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.backoff import Backoff, backoff_delay_secs, retrying
from core.clock import VirtualClock

BASE_SECS = 1.0
CAP_SECS = 60.0
ATTEMPTS = range(0, 80)
JITTERS = (0.0, 0.1, 0.5, 1.0)
RANDS = (0.0, 0.3, 0.5, 0.999, 1.0)


def _unjittered(attempt: int, base: float = BASE_SECS, cap: float = CAP_SECS) -> float:
    return min(cap, base * 2.0**attempt)


@pytest.mark.parametrize("attempt", ATTEMPTS)
@pytest.mark.parametrize("jitter", JITTERS)
def test_delay_stays_between_the_jitter_floor_and_the_cap(attempt: int, jitter: float) -> None:
    for rand in RANDS:
        delay = backoff_delay_secs(attempt, BASE_SECS, CAP_SECS, jitter, rand)
        assert delay <= CAP_SECS
        assert delay <= _unjittered(attempt)
        assert delay >= (1.0 - jitter) * _unjittered(attempt)


@pytest.mark.parametrize("attempt", ATTEMPTS)
def test_rand_zero_takes_nothing_off_and_rand_one_takes_the_whole_jitter(attempt: int) -> None:
    assert backoff_delay_secs(attempt, BASE_SECS, CAP_SECS, 0.5, 0.0) == _unjittered(attempt)
    assert backoff_delay_secs(attempt, BASE_SECS, CAP_SECS, 0.5, 1.0) == 0.5 * _unjittered(attempt)
    assert backoff_delay_secs(attempt, BASE_SECS, CAP_SECS, 1.0, 1.0) == 0.0


@pytest.mark.parametrize("attempt", ATTEMPTS)
@pytest.mark.parametrize("rand", RANDS)
def test_zero_jitter_is_exact(attempt: int, rand: float) -> None:
    assert backoff_delay_secs(attempt, BASE_SECS, CAP_SECS, 0.0, rand) == _unjittered(attempt)


def test_delay_doubles_until_the_cap_then_stays_there() -> None:
    delays = [backoff_delay_secs(a, 0.5, 60.0, 0.0, 0.5) for a in range(12)]
    assert delays == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0, 60.0, 60.0, 60.0]


def test_a_base_above_the_cap_starts_at_the_cap() -> None:
    assert backoff_delay_secs(0, 90.0, 60.0, 0.0, 0.0) == 60.0


def test_huge_attempt_numbers_neither_overflow_nor_stall_below_the_cap() -> None:
    assert backoff_delay_secs(10**9, 1.0, 60.0, 0.0, 0.0) == 60.0
    assert (
        backoff_delay_secs(10**9, 1e-300, 3600.0, 0.0, 0.0) == 3600.0
    )  # tiny base still gets there


@given(
    attempt=st.integers(min_value=0, max_value=10_000),
    base=st.floats(min_value=0.0, max_value=1e6),
    cap=st.floats(min_value=0.0, max_value=1e9),
    jitter=st.floats(min_value=0.0, max_value=1.0),
    rand=st.floats(min_value=0.0, max_value=1.0),
)
def test_bounds_hold_for_any_inputs(
    attempt: int, base: float, cap: float, jitter: float, rand: float
) -> None:
    delay = backoff_delay_secs(attempt, base, cap, jitter, rand)
    unjittered = min(cap, base * 2.0 ** min(attempt, 1023))
    assert 0.0 <= delay <= cap
    assert (1.0 - jitter) * unjittered <= delay <= unjittered


@given(
    attempt=st.integers(min_value=0, max_value=200),
    base=st.floats(min_value=1e-6, max_value=1e3),
    cap=st.floats(min_value=1e-6, max_value=1e6),
)
def test_unjittered_delay_never_shrinks_as_attempts_grow(
    attempt: int, base: float, cap: float
) -> None:
    now = backoff_delay_secs(attempt, base, cap, 0.0, 0.0)
    later = backoff_delay_secs(attempt + 1, base, cap, 0.0, 0.0)
    assert later >= now
    assert later == cap or later == 2 * now


@pytest.mark.parametrize(
    ("attempt", "base", "cap", "jitter", "rand", "match"),
    [
        (-1, 1.0, 60.0, 0.5, 0.5, "attempt"),
        (0, -1.0, 60.0, 0.5, 0.5, "base_secs"),
        (0, 1.0, -60.0, 0.5, 0.5, "cap_secs"),
        (0, math.nan, 60.0, 0.5, 0.5, "base_secs"),
        (0, 1.0, math.nan, 0.5, 0.5, "cap_secs"),
        (0, 1.0, 60.0, -0.1, 0.5, "jitter_fraction"),
        (0, 1.0, 60.0, 1.1, 0.5, "jitter_fraction"),
        (0, 1.0, 60.0, 0.5, -0.01, "rand"),
        (0, 1.0, 60.0, 0.5, 1.01, "rand"),
        (0, 1.0, 60.0, 0.5, math.nan, "rand"),
    ],
)
def test_out_of_range_inputs_are_refused(
    attempt: int, base: float, cap: float, jitter: float, rand: float, match: str
) -> None:
    with pytest.raises(ValueError, match=match):
        backoff_delay_secs(attempt, base, cap, jitter, rand)


# --- the policy type and retrying() on the injected clock -------------------------------------


class _Flaky(Exception):
    pass


async def test_retrying_sleeps_on_the_injected_clock_and_gives_up_after_max_attempts() -> None:
    clock = VirtualClock()
    policy = Backoff(base_secs=2.0, cap_secs=5.0, jitter_fraction=0.0, max_attempts=3)
    calls: list[float] = []

    async def call() -> None:
        async for attempt in retrying(policy, clock, retry_on=lambda e: isinstance(e, _Flaky)):
            with attempt:
                calls.append(clock.monotonic_secs())
                raise _Flaky("down")

    task = asyncio.create_task(call())
    await clock.advance(100.0)
    with pytest.raises(_Flaky):
        await task
    assert calls == [0.0, 2.0, 6.0]  # 2 s, then 4 s; the third failure is re-raised as is


async def test_retrying_waits_at_least_the_servers_hint_and_stops_on_other_errors() -> None:
    clock = VirtualClock()
    policy = Backoff(base_secs=1.0, cap_secs=1.0, jitter_fraction=0.5, max_attempts=5)
    seen: list[float] = []

    async def call() -> str:
        async for attempt in retrying(
            policy,
            clock,
            retry_on=lambda e: isinstance(e, _Flaky),
            rng=random.Random(1),
            wait_hint=lambda e: 7.0,
        ):
            with attempt:
                seen.append(clock.monotonic_secs())
                if len(seen) == 1:
                    raise _Flaky("busy")
                if len(seen) == 2:
                    raise KeyError("not worth a retry")
        raise AssertionError("unreachable")

    task = asyncio.create_task(call())
    await clock.advance(30.0)
    with pytest.raises(KeyError):
        await task
    assert seen == [0.0, 7.0]


def test_backoff_policy_delay_is_the_pure_function() -> None:
    policy = Backoff(base_secs=1.0, cap_secs=60.0, jitter_fraction=0.5)
    assert policy.delay_secs(3, 0.5) == backoff_delay_secs(3, 1.0, 60.0, 0.5, 0.5)
