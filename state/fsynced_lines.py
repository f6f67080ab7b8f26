"""Write-ahead JSON-lines files: one fsynced line per record, read back with a torn tail dropped.

The exits outbox (``state.outbox``) and the ccxt broker's order journal (``broker.order_journal``)
both append a line and fsync it BEFORE acting on it. So when a file is read back:

- a bad LAST line is a kill mid-append: whoever appended it had not acted yet, so it is dropped
  with a warning and cut off the file (the next append starts on a clean line);
- a bad line anywhere else means the file was damaged or edited: ``RefuseToStartError``, file left
  untouched, because guessing what it held could act twice or forget an action.

Blank lines carry nothing and are skipped. (``state.journal`` is different on purpose: the decision
journal is a record, not a promise, so its torn tail is moved aside to a fragment file instead.)
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

import orjson
from pydantic import ValidationError

from core.errors import RefuseToStartError
from state.regular_file import read_bytes_or_none

log = logging.getLogger(__name__)

#: what a line's parser may raise for a line that is not a record (anything else propagates)
BAD_LINE_ERRORS: tuple[type[Exception], ...] = (
    orjson.JSONDecodeError,
    ValidationError,
    ValueError,
    KeyError,
)


def read_lines(path: Path, apply: Callable[[bytes], None], *, what: str, advice: str) -> int:
    """Feed every line of ``path`` (if it exists) to ``apply``, oldest first; returns how many
    were applied. ``what`` names the file in messages (``"outbox"``), ``advice`` says what a
    person should do with a damaged one."""
    try:  # not a bare read: a FIFO in its place blocked the start for good
        data = read_bytes_or_none(path)
    except OSError as exc:
        raise RefuseToStartError(
            f"{what} {path} cannot be read ({exc.strerror or exc}): {advice}"
        ) from None
    lines = data.split(b"\n") if data is not None else []
    if lines and lines[-1] == b"":
        lines.pop()
    applied = 0
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            apply(line)
        except BAD_LINE_ERRORS as exc:
            if number == len(lines):
                log.warning("%s %s: dropping torn last line: %s", what, path, exc)
                _truncate(path, sum(len(good) + 1 for good in lines[:-1]))
                break
            raise RefuseToStartError(
                f"{what} {path} line {number} is damaged ({exc}); it was left untouched: {advice}"
            ) from exc
        applied += 1
    return applied


def append_line(path: Path, line: bytes) -> None:
    """Append one complete line (``line`` ends with a newline) and fsync it before returning.

    An append that fails (a disk that fills in the middle of the line) takes back what it wrote:
    the caller retries it, and the part left behind would have made the retried line, once the
    disk freed, part of a damaged one (a refusal to start once lines followed it)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        size = os.fstat(fd).st_size  # one writer appends to each of these files
        try:
            written = 0
            while written < len(line):
                written += os.write(fd, line[written:])
            os.fsync(fd)
        except OSError:
            _take_back(fd, path, size)
            raise
    finally:
        os.close(fd)


def _take_back(fd: int, path: Path, size: int) -> None:
    try:
        os.ftruncate(fd, size)  # shrinking needs no space
    except OSError as exc:  # the torn tail is then dropped at the next start (read_lines)
        log.error("%s: the part of a failed append could not be taken back: %s", path, exc)


def _truncate(path: Path, size: int) -> None:
    with path.open("r+b") as handle:
        handle.truncate(size)
        handle.flush()
        os.fsync(handle.fileno())


__all__ = ["BAD_LINE_ERRORS", "append_line", "read_lines"]
