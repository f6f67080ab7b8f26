"""Replay's read-ahead of the 4h frames (``runner.replay.fit_frames``) equals what the daemon's own
history cache holds at each 4h close it plans for: the fit-ahead pool's fits are used only when
the bytes match, so a wrong frame would cost every planned fit."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime

import pandas as pd
import pytest
from fakes.fixed_clock import FixedClock

from market.history import OhlcvHistory
from runner.replay.fit_frames import RecordedFutureFrames
from sim.feed import SimFeed
from sim.inprocess import RecordedOhlcvExchange

TICKER = "BTC/USDT"


def ms(day: str) -> int:
    return int(datetime.fromisoformat(day).replace(tzinfo=UTC).timestamp() * 1000)


@pytest.fixture(scope="module")
def feed() -> SimFeed:
    return SimFeed((TICKER,))


@pytest.mark.parametrize(
    ("first_day", "history_days"),
    [("2025-01-03", 180), ("2025-03-01", 180), ("2025-07-10", 30)],  # window before the data, too
)
async def test_each_planned_frame_is_the_history_the_daemon_holds(
    feed: SimFeed, first_day: str, history_days: int
) -> None:
    frames = RecordedFutureFrames(feed, history_days=history_days, end_ms=ms("2025-08-01"))
    for at_ms in itertools.islice(frames.close_times_ms(TICKER, ms(first_day)), 3):
        clock = FixedClock(at_ms)
        history = OhlcvHistory(
            RecordedOhlcvExchange(feed, clock),
            clock,
            tickers=[TICKER],
            days=history_days,
        )
        held = await history.refresh(TICKER)
        assert not held.empty
        pd.testing.assert_frame_equal(frames.frame_at(TICKER, at_ms), held, check_exact=True)
