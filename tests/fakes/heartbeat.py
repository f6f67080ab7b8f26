"""A heartbeat file as the daemon's ``Heartbeat`` writes it, dated ``age_secs`` ago in real time:
for tests of what ``vigil health`` / ``vigil status`` make of its age."""

from __future__ import annotations

import os
import time
from pathlib import Path

from fakes.fixed_clock import FixedClock
from runner.heartbeat import Heartbeat

MARCH_1_MS = 1_740_787_200_000  # 2025-03-01 00:00 UTC


def write_beat(path: Path, *, age_secs: float = 0.0) -> None:
    Heartbeat(FixedClock(MARCH_1_MS), path, 30.0).beat()
    stamp = time.time() - age_secs
    os.utime(path, (stamp, stamp))
