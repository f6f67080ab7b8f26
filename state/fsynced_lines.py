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
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

import orjson
from pydantic import ValidationError

from core.errors import RefuseToStartError
from core.regular_file import open_regular_file
from state.segments import LINE_MAX_BYTES, OVERLONG_LINE

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
    if path.is_symlink():  # each append went through it, to whatever it named
        raise RefuseToStartError(
            f"{what} {path} is a symlink: it is written at its own name, never through a link "
            f"(link its folder instead); move it away and start again"
        )
    try:  # not a bare open: a FIFO in its place blocked the start for good
        handle = open_regular_file(path)
    except FileNotFoundError:
        return 0
    except OSError as exc:
        raise RefuseToStartError(
            f"{what} {path} cannot be read ({exc.strerror or exc}): {advice}"
        ) from None
    applied = 0
    with handle:
        lines = _lines(handle)
        current = next(lines, None)
        number = 0
        while current is not None:
            line, start = current
            number += 1
            following = next(lines, None)
            current = following
            if not line.strip():
                continue
            try:
                apply(line)
            except BAD_LINE_ERRORS as exc:
                if following is None:
                    log.warning("%s %s: dropping torn last line: %s", what, path, exc)
                    _truncate(path, start)
                    break
                raise RefuseToStartError(
                    f"{what} {path} line {number} is damaged ({exc}); it was left untouched: "
                    f"{advice}"
                ) from exc
            applied += 1
    return applied


def _lines(handle: BinaryIO) -> Iterator[tuple[bytes, int]]:
    """Each line without its newline, with the offset it starts at. A run of ``LINE_MAX_BYTES``
    without a newline (the zeros a crash can leave at the end) is passed over as it is read and
    given as ``OVERLONG_LINE``, no record: read whole, a gigabyte of them took two at start."""
    offset = 0
    while line := handle.readline(LINE_MAX_BYTES):
        start = offset
        offset += len(line)
        if len(line) == LINE_MAX_BYTES and not line.endswith(b"\n"):
            while rest := handle.readline(LINE_MAX_BYTES):
                offset += len(rest)
                if rest.endswith(b"\n"):
                    break
            line = OVERLONG_LINE
        yield line.removesuffix(b"\n"), start


def append_line(path: Path, line: bytes) -> None:
    """Append one complete line (``line`` ends with a newline) and fsync it before returning.

    An append that fails (a disk that fills in the middle of the line) takes back what it wrote:
    the caller retries it, and the part left behind would have made the retried line, once the
    disk freed, part of a damaged one (a refusal to start once lines followed it)."""
    # a link planted after the start is not followed either (ELOOP, the caller's failed append)
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
    fd = os.open(path, flags, 0o600)
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
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    try:
        os.ftruncate(fd, size)
        os.fsync(fd)
    finally:
        os.close(fd)


__all__ = ["BAD_LINE_ERRORS", "append_line", "read_lines"]
