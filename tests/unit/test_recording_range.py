"""``core.clock``'s recording range, in milliseconds (what a file or journal may hold) and in whole
UTC days (what a replay, a sweep's period and an API run may ask for): the two say the same."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta

from core.clock import (
    EARLIEST_TIME_MS,
    FIRST_RECORDING_DAY,
    LAST_RECORDING_DAY,
    LATEST_TIME_MS,
    is_recording_time,
)


def _ms(at: datetime) -> int:
    return int(at.timestamp() * 1000)


def test_the_days_are_the_whole_days_of_the_millisecond_range() -> None:
    first = datetime.combine(FIRST_RECORDING_DAY, time(), UTC)
    after_last = datetime.combine(LAST_RECORDING_DAY + timedelta(days=1), time(), UTC)
    assert _ms(first) == EARLIEST_TIME_MS
    assert _ms(after_last) == LATEST_TIME_MS
    assert is_recording_time(EARLIEST_TIME_MS) and is_recording_time(LATEST_TIME_MS - 1)
    assert not is_recording_time(EARLIEST_TIME_MS - 1) and not is_recording_time(LATEST_TIME_MS)
