"""core.failure_streak: a streak is news when it starts and when its reason changes; its end says
how many failures it had."""

from __future__ import annotations

from core.failure_streak import FailureStreak


def test_a_streak_is_said_once_and_its_end_counts_it() -> None:
    streak = FailureStreak()
    assert streak.ended() == 0  # nothing to end
    assert [streak.failed() for _ in range(3)] == [True, False, False]
    assert streak.ended() == 3 and streak.ended() == 0
    assert streak.failed()  # a new streak is news again


def test_another_reason_is_news_and_the_same_one_is_not() -> None:
    streak = FailureStreak()
    said = [streak.failed(why) for why in ("full", "full", "locked", "locked", "full")]
    assert said == [True, False, True, False, True]
    assert streak.ended() == 5
