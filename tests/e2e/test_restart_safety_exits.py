"""Restart safety at the failpoints of an exit, from its fill row to its end.

The case (``fakes.restart_safety``): SIGKILL the daemon at the failpoint, restart the same state dir,
and nothing is lost or doubled: journals whole, no order twice, the tracker holds the broker's
positions, each exit learned once.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes.restart_safety import CASE_TIMEOUT_SECS, killed_then_restarted_loses_and_doubles_nothing

pytestmark = pytest.mark.e2e


@pytest.mark.timeout(CASE_TIMEOUT_SECS)
@pytest.mark.parametrize(
    "failpoint",
    [
        # between the exit's fill row and the exit event: the exits outbox hands it over
        "after_exit_fill",
        "after_exit_outboxed",
        "after_exit_recorded",
        "after_exit",
    ],
)
async def test_killed_at_a_failpoint_then_restarted_loses_and_doubles_nothing(
    tmp_path: Path, failpoint: str
) -> None:
    await killed_then_restarted_loses_and_doubles_nothing(tmp_path, failpoint)
