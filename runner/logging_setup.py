"""Console logging. Lines carry the daemon clock's instant, which differs from wall time in the sim."""

from __future__ import annotations

import logging
import sys
from datetime import UTC, datetime

from core.clock import Clock

_FORMAT = "%(asctime)s [%(clock_time)s] %(levelname)-7s %(name)s: %(message)s"


class _ClockTimeFilter(logging.Filter):
    def __init__(self, clock: Clock | None) -> None:
        super().__init__()
        self.clock = clock

    def filter(self, record: logging.LogRecord) -> bool:
        if self.clock is None:
            record.clock_time = "-"
        else:
            instant = datetime.fromtimestamp(self.clock.now_ms() / 1000, tz=UTC)
            record.clock_time = instant.strftime("%Y-%m-%d %H:%M:%S")
        return True


_filter = _ClockTimeFilter(None)


def configure_logging(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(_FORMAT, datefmt="%H:%M:%S"))
    handler.addFilter(_filter)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("websockets", "aiohttp.access", "ccxt"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))


def show_clock_time(clock: Clock | None) -> None:
    """Stamp log lines with ``clock``'s instant from now on (the simulated time under the sim)."""
    _filter.clock = clock
