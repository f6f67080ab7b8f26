"""Logging: the console and, for the daemon, a size-rotated file in the state dir's ``logs/``.

Lines carry the daemon clock's instant, which differs from wall time in the sim. The format is
text (people reading a terminal) or JSON lines (``--log-format json``: one object a line for log
collectors). Secrets are taken out of every record before any handler formats it.
"""

from __future__ import annotations

import logging
import logging.handlers
import sys
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Final, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field

from core.clock import Clock
from core.errors import RefuseToStartError
from core.redact import Redactor
from core.regular_file import refuse_unless_regular
from runner.log_file import LogFileHandler
from state.line_text import terminal_safe_json, terminal_safe_lines
from state.state_file import STATE_DIR_SETTING

LogFormat = Literal["text", "json"]


class LogConfig(BaseModel):
    """``[log]`` (env ``VIGIL_LOG__FORMAT``...): line format and the log file.

    The file is on by default: a daemon in the background has no terminal, and README points people
    at ``logs/``. 10 MiB x (1 + 4 backups) caps it at 50 MiB: weeks of INFO lines at the daemon's
    rate (a few lines a decision), and small beside the journal it sits next to.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    format: LogFormat = "text"
    file: bool = True
    file_max_bytes: int = Field(10 * 1024 * 1024, gt=0)
    # a rollover looks for each backup's name on the loop: 10^12 of them hung the daemon for good
    file_backups: int = Field(4, ge=1, le=1000)

    @property
    def total_cap_bytes(self) -> int:
        return self.file_max_bytes * (1 + self.file_backups)


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


class JsonLinesFormatter(logging.Formatter):
    """One JSON object a line: wall time (UTC, ms), the clock's time, level, logger, message and
    the traceback if any (already redacted by ``RedactingFilter``)."""

    def format(self, record: logging.LogRecord) -> str:
        instant = datetime.fromtimestamp(record.created, tz=UTC)
        line: dict[str, object] = {
            "ts": instant.strftime("%Y-%m-%dT%H:%M:%S.") + f"{instant.microsecond // 1000:03d}Z",
            "clock_time": getattr(record, "clock_time", "-"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            line["exc"] = record.exc_text
        return terminal_safe_json(orjson.dumps(line).decode())  # orjson writes U+009B raw


class TextFormatter(logging.Formatter):
    """The text format, with every control character of a message or a traceback but its line
    breaks and tabs written as an escape (``\\x1b``): a message quotes peers (an exchange's
    error body, through ccxt's exception), and ESC [2J or U+009B in one drove the terminal of
    whoever read the console or tailed ``vigil.log``."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = terminal_safe_lines(record.message)  # made again at each format
        return super().formatMessage(record)

    def format(self, record: logging.LogRecord) -> str:
        cached = record.exc_text  # shared by every handler (``RedactingFilter`` sets it)
        if cached:
            record.exc_text = terminal_safe_lines(cached)
        try:
            return super().format(record)
        finally:
            record.exc_text = cached


_filter = _ClockTimeFilter(None)
#: libraries whose INFO lines are one per frame or request: WARNING at the least
NOISY_LOGGERS: Final = ("websockets", "aiohttp.access", "ccxt")
_redacting = RedactingFilter(Redactor())


def _formatter(log_format: LogFormat, datefmt: str) -> logging.Formatter:
    if log_format == "json":
        return JsonLinesFormatter()
    return TextFormatter(_FORMAT, datefmt=datefmt)


def _handler(handler: logging.Handler, formatter: logging.Formatter) -> logging.Handler:
    handler.setFormatter(formatter)
    handler.addFilter(_redacting)  # each handler: a record is redacted before any formats it
    handler.addFilter(_filter)
    return handler


def _log_file_handler(log_file: Path, config: LogConfig) -> logging.Handler:
    try:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        # appended to by name: a symlink there had every line appended to whatever it named
        refuse_unless_regular(log_file, "the log file ")
        return LogFileHandler(
            log_file, max_bytes=config.file_max_bytes, backups=config.file_backups
        )
    except OSError as exc:  # the first thing a daemon writes in its state dir
        raise RefuseToStartError(
            f"the log file {log_file} cannot be created ({exc.strerror or exc}); fix the state "
            f"dir's ownership/permissions or point {STATE_DIR_SETTING} elsewhere"
        ) from None


def configure_logging(
    level: str,
    secrets: Iterable[str | None] = (),
    *,
    config: LogConfig | None = None,
    log_file: Path | None = None,
) -> None:
    """Console logging at ``level`` in ``config.format``, and, given ``log_file`` and with
    ``config.file`` on, the same lines into that size-rotated file (its folder is created).
    ``secrets`` (configured keys) never appear in a line."""
    config = config or LogConfig()
    _redacting.redactor = Redactor(secrets)
    handlers = [_handler(logging.StreamHandler(sys.stderr), _formatter(config.format, "%H:%M:%S"))]
    if log_file is not None and config.file:
        rotating = _log_file_handler(log_file, config)
        handlers.append(_handler(rotating, _formatter(config.format, "%Y-%m-%dT%H:%M:%S")))
    root = logging.getLogger()
    for old in root.handlers:
        if isinstance(old, logging.handlers.RotatingFileHandler):
            old.close()  # a file of an earlier configuration (tests configure more than once)
    root.handlers[:] = handlers
    root.setLevel(level)
    for noisy in NOISY_LOGGERS:
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))


def show_clock_time(clock: Clock | None) -> None:
    """Stamp log lines with ``clock``'s instant from now on (the simulated time under the sim)."""
    _filter.clock = clock
