"""Heartbeat loop and the health check the container's HEALTHCHECK runs.

The loop touches ``<state>/heartbeat`` every ``interval_secs`` of the daemon's clock. ``check_health``
compares the file's modification time with real time: Docker judges liveness in real seconds.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from core.clock import Clock

log = logging.getLogger(__name__)


class Heartbeat:
    def __init__(
        self,
        clock: Clock,
        path: Path,
        interval_secs: float,
        *,
        on_beat: Callable[[], None] | None = None,
    ) -> None:
        self._clock = clock
        self._path = path
        self._interval_secs = interval_secs
        self._on_beat = on_beat
        self.beats = 0

    def beat(self) -> None:
        # Rewrite, not just utime: the content says which simulated instant the daemon was at.
        self._path.write_text(f"{self._clock.now_ms()} {os.getpid()}\n")
        self.beats += 1

    async def run(self) -> None:
        while True:
            self.beat()
            if self._on_beat is not None:
                self._on_beat()
            await self._clock.sleep(self._interval_secs)


@dataclass(frozen=True)
class HealthStatus:
    healthy: bool
    reason: str
    age_secs: float | None


def check_health(path: Path, stale_secs: float, now_wall_secs: float) -> HealthStatus:
    """Healthy when the heartbeat file exists and was touched within ``stale_secs`` of real time."""
    try:
        mtime_secs = path.stat().st_mtime
    except FileNotFoundError:
        return HealthStatus(False, f"no heartbeat file at {path}", None)
    except OSError as exc:
        return HealthStatus(False, f"cannot read heartbeat {path}: {exc}", None)
    age_secs = now_wall_secs - mtime_secs
    if age_secs > stale_secs:
        return HealthStatus(
            False, f"heartbeat is stale: {age_secs:.0f} s old (limit {stale_secs:.0f} s)", age_secs
        )
    return HealthStatus(True, f"heartbeat {age_secs:.1f} s old", age_secs)
