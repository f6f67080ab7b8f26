"""Restart safety at the failpoints of an entry: the orders sent, the decision journaled, the fill.

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
        "after_orders_sent",
        "after_decision_journaled",
        "after_fill",
    ],
)
async def test_killed_at_a_failpoint_then_restarted_loses_and_doubles_nothing(
    tmp_path: Path, failpoint: str
) -> None:
    await killed_then_restarted_loses_and_doubles_nothing(tmp_path, failpoint)
