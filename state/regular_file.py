"""Reading files a person may replace with anything: only a regular file is read.

A state file, MEMORY.md or a rule file is a path a person controls. Something other than a
regular file there must be a clear error, never a stall: a FIFO blocks an ordinary ``open``
until someone writes to it, and these files are read on the daemon's event loop, so a FIFO put in
place of one froze every loop, the watchdog included. Each file is opened without blocking (a
regular file ignores the flag), checked with ``fstat`` on the open descriptor (no race with a
rename) and refused with ``IsADirectoryError`` unless it is a regular file.
"""

from __future__ import annotations

import os
import stat
from io import TextIOWrapper
from pathlib import Path
from typing import BinaryIO


def open_regular_file(path: Path | str) -> BinaryIO:
    """``path`` opened for reading in binary; ``IsADirectoryError`` for anything but a regular
    file (a directory, a device, a FIFO, a socket), ``FileNotFoundError`` when there is none."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise IsADirectoryError(f"{path} is not a regular file")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def open_regular_text(path: Path | str, *, encoding: str = "utf-8") -> TextIOWrapper:
    """``open_regular_file`` as text (``UnicodeDecodeError`` when read, as ``open`` gives)."""
    return TextIOWrapper(open_regular_file(path), encoding=encoding)


def read_regular_file(path: Path | str) -> tuple[os.stat_result, bytes]:
    """``path``'s stat and bytes, both from one open file (see ``open_regular_file``)."""
    with open_regular_file(path) as handle:
        st = os.fstat(handle.fileno())
        return st, handle.read()


def read_regular_text(path: Path | str, *, encoding: str = "utf-8") -> str:
    """``path``'s text (see ``open_regular_file``)."""
    return read_regular_file(path)[1].decode(encoding)


def read_bytes_or_none(path: Path | str) -> bytes | None:
    """``path``'s bytes, None when there is no file (``read_regular_file`` otherwise)."""
    try:
        return read_regular_file(path)[1]
    except FileNotFoundError:
        return None


__all__ = [
    "open_regular_file",
    "open_regular_text",
    "read_bytes_or_none",
    "read_regular_file",
    "read_regular_text",
]
