"""CircuitBreaker on a VirtualClock: closed -> open after 3 failures -> half_open after 15 min,
one trial -> closed or open again; transitions timestamped."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.breaker import BreakerState, CircuitBreaker
from core.clock import VirtualClock

EPOCH_MS = 1_743_984_000_000


def _opened(clock: VirtualClock) -> CircuitBreaker:
    breaker = CircuitBreaker(clock)
    for _ in range(3):
        assert breaker.allow()
        breaker.record_failure("overloaded")
    return breaker


def test_two_failures_keep_it_closed_and_a_success_resets_the_count() -> None:
    breaker = CircuitBreaker(VirtualClock(EPOCH_MS))
    breaker.record_failure("x")
    breaker.record_failure("x")
    breaker.record_success()
    breaker.record_failure("x")
    breaker.record_failure("x")
    assert breaker.state is BreakerState.CLOSED and breaker.allow()
    assert breaker.transitions == []


def test_three_consecutive_failures_open_it_and_calls_are_refused() -> None:
    clock = VirtualClock(EPOCH_MS)
    breaker = _opened(clock)
    assert breaker.state is BreakerState.OPEN
    assert not breaker.allow()
    (opened,) = breaker.transitions
    assert (opened.from_state, opened.to_state, opened.at_ms) == ("closed", "open", EPOCH_MS)
    assert "3 consecutive failures, last: overloaded" in opened.reason
    assert breaker.reopens_in_secs() == 900.0


async def test_after_open_secs_one_trial_goes_out_and_success_closes() -> None:
    clock = VirtualClock(EPOCH_MS)
    breaker = _opened(clock)
    await clock.advance(899)
    assert not breaker.allow()
    await clock.advance(1)
    assert breaker.state is BreakerState.HALF_OPEN
    assert breaker.allow()
    assert not breaker.allow()  # only one trial at a time
    breaker.record_success()
    assert breaker.state.value == "closed" and breaker.allow()
    assert [t.to_state for t in breaker.transitions] == ["open", "half_open", "closed"]
    assert breaker.transitions[1].at_ms == EPOCH_MS + 900_000


async def test_a_call_let_out_while_closed_and_answered_once_open_does_not_close_it() -> None:
    """A review call goes out while two decisions have failed; the third failure opens the
    breaker; the review then succeeds. The breaker stays open for its full period (it once went
    open -> closed at once, 'trial call succeeded', with no trial), and the count starts again."""
    clock = VirtualClock(EPOCH_MS)
    breaker = CircuitBreaker(clock)
    for _ in range(2):
        assert breaker.allow()
        breaker.record_failure("overloaded")
    assert breaker.allow()  # the review, in flight
    breaker.record_failure("overloaded")  # the third decision
    await clock.advance(200)
    breaker.record_success()  # the review's answer
    assert breaker.state is BreakerState.OPEN and not breaker.allow()
    assert breaker.consecutive_failures == 0
    assert breaker.reopens_in_secs() == breaker.open_secs - 200
    await clock.advance(breaker.open_secs - 200)
    assert breaker.allow()  # the trial
    breaker.record_success()
    assert [(t.from_state, t.to_state) for t in breaker.transitions] == [
        ("closed", "open"),
        ("open", "half_open"),
        ("half_open", "closed"),
    ]


async def test_a_failed_trial_opens_it_for_another_full_period() -> None:
    clock = VirtualClock(EPOCH_MS)
    breaker = _opened(clock)
    await clock.advance(900)
    assert breaker.allow()
    breaker.record_failure("timeout")
    assert breaker.state is BreakerState.OPEN
    assert breaker.transitions[-1].reason == "trial call failed: timeout"
    await clock.advance(899)
    assert not breaker.allow()
    await clock.advance(1)
    assert breaker.allow()


async def test_an_abandoned_trial_frees_the_slot() -> None:
    clock = VirtualClock(EPOCH_MS)
    breaker = _opened(clock)
    await clock.advance(900)
    assert breaker.allow()
    breaker.release_trial()
    assert breaker.allow()


@pytest.mark.parametrize(("threshold", "open_secs"), [(0, 900.0), (3, 0.0)])
def test_bad_settings_are_refused(threshold: int, open_secs: float) -> None:
    with pytest.raises(ValueError):
        CircuitBreaker(VirtualClock(), threshold, open_secs)


@given(st.lists(st.booleans(), max_size=40))
def test_it_opens_exactly_when_the_last_three_outcomes_failed(outcomes: list[bool]) -> None:
    breaker = CircuitBreaker(VirtualClock(EPOCH_MS))  # time never moves: once open, stays open
    streak = 0
    for ok in outcomes:
        if not breaker.allow():
            break
        if ok:
            breaker.record_success()
            streak = 0
        else:
            breaker.record_failure("x")
            streak += 1
        assert (breaker.state is BreakerState.OPEN) == (streak >= 3)


def _half_open_trial(clock: VirtualClock) -> CircuitBreaker:
    breaker = _opened(clock)
    clock._now_secs += breaker.open_secs  # the open time is up (no sleeper to release)
    assert breaker.state is BreakerState.HALF_OPEN
    return breaker


def test_a_trial_that_ends_in_a_foreign_exception_counts_as_a_failed_trial() -> None:
    clock = VirtualClock(EPOCH_MS)
    breaker = _half_open_trial(clock)
    with pytest.raises(KeyError), breaker.guard():
        assert breaker.allow()
        raise KeyError("a validation error nobody expected")
    assert breaker.state is BreakerState.OPEN
    assert breaker.reopens_in_secs() == breaker.open_secs  # not "next trial in 0 s" forever
    assert breaker.transitions[-1].reason == "trial call failed: KeyError"


def test_a_trial_left_without_a_verdict_frees_the_slot_and_a_verdict_is_kept() -> None:
    clock = VirtualClock(EPOCH_MS)
    breaker = _half_open_trial(clock)
    with breaker.guard():
        assert breaker.allow()
    assert breaker.allow()  # abandoned: the next call may try
    with pytest.raises(ValueError), breaker.guard():
        breaker.record_success()
        raise ValueError("after the verdict: the success stands")
    assert breaker.state is BreakerState.CLOSED
