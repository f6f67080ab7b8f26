"""Console logging. Lines carry the daemon clock's instant, which differs from wall time in the sim."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable
from datetime import UTC, datetime

from core.clock import Clock
from core.redact import Redactor

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


class RedactingFilter(logging.Filter):
    """Takes secrets out of every record before any handler formats it: debug logs of the HTTP
    libraries print request headers (x-api-key, Authorization), and a message may quote a key."""

    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self.redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted, count = self.redactor.redact(message)
        if count:
            record.msg, record.args = redacted, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.redactor(record.exc_text)
        return True


_filter = _ClockTimeFilter(None)
_redacting = RedactingFilter(Redactor())


def configure_logging(level: str, secrets: Iterable[str | None] = ()) -> None:
    """Console logging at ``level``; ``secrets`` (configured keys) never appear in a line."""
    _redacting.redactor = Redactor(secrets)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(_FORMAT, datefmt="%H:%M:%S"))
    handler.addFilter(_redacting)
    handler.addFilter(_filter)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("websockets", "aiohttp.access", "ccxt"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))


def show_clock_time(clock: Clock | None) -> None:
    """Stamp log lines with ``clock``'s instant from now on (the simulated time under the sim)."""
    _filter.clock = clock
