"""Reading files a person may replace with anything: only a regular file is read.

A state file, MEMORY.md or a rule file is a path a person controls. Something other than a
regular file there must be a clear error, never a stall: a FIFO blocks an ordinary ``open``
until someone writes to it, and these files are read on the daemon's event loop, so a FIFO put in
place of one froze every loop, the watchdog included. Each file is opened without blocking (a
regular file ignores the flag), checked with ``fstat`` on the open descriptor (no race with a
rename) and refused with ``IsADirectoryError`` unless it is a regular file.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from io import TextIOWrapper
from pathlib import Path
from typing import BinaryIO, Protocol

from core.errors import RefuseToStartError


def open_regular_file(
    path: Path | str, *, buffering: int = -1, follow_links: bool = True
) -> BinaryIO:
    """``path`` opened for reading in binary; ``IsADirectoryError`` for anything but a regular
    file (a directory, a device, a FIFO, a socket), ``FileNotFoundError`` when there is none.
    ``follow_links`` False: a symlink at ``path`` itself is ``SymlinkRefusedError`` (a secret
    vigil made there is read only where it made it)."""
    flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK
    try:
        fd = os.open(path, flags if follow_links else flags | os.O_NOFOLLOW)
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow_links:
            raise SymlinkRefusedError(
                exc.errno, "a symlink, never read through", str(path)
            ) from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise not_a_regular_file(path, mode)
        return os.fdopen(fd, "rb", buffering=buffering)
    except BaseException:
        os.close(fd)
        raise


class SymlinkRefusedError(OSError):
    """A symlink where a file vigil keeps at its own name was to be read (``follow_links``)."""


def not_a_regular_file(path: Path | str, mode: int) -> IsADirectoryError:
    """The error for ``path``, found to be of ``mode`` (a ``st_mode``), saying what it is."""
    return IsADirectoryError(f"{path} is not a regular file ({_kind(mode)})")


def _kind(mode: int) -> str:
    """What stands where a file was expected: its message called a FIFO a directory (the
    error's type), and a person looked for a folder that was not there."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a device"


def open_regular_text(path: Path | str, *, encoding: str = "utf-8") -> TextIOWrapper:
    """``open_regular_file`` as text (``UnicodeDecodeError`` when read, as ``open`` gives)."""
    return TextIOWrapper(open_regular_file(path), encoding=encoding)


class FileTooLargeError(OSError):
    """The file holds more than its reader takes; the message says how much."""


class ReadsBytes(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


def blocks_within(
    stream: ReadsBytes, max_bytes: int, block_bytes: int = 1 << 20
) -> Iterator[bytes]:
    """``stream``'s blocks to its end; ``FileTooLargeError`` once they add up past ``max_bytes``,
    having read one block past it at most (a gzip bomb: a few hundred kB inflating to gigabytes)."""
    total = 0
    while block := stream.read(block_bytes):
        total += len(block)
        if total > max_bytes:
            raise FileTooLargeError(
                f"it inflates past {max_bytes >> 20} MiB, more than such a file holds (a gzip bomb?)"
            )
        yield block


def read_regular_file(
    path: Path | str, *, max_bytes: int | None = None, follow_links: bool = True
) -> tuple[os.stat_result, bytes]:
    """``path``'s stat and bytes, both from one open file (see ``open_regular_file``);
    ``FileTooLargeError`` when it holds more than ``max_bytes`` (only that much more is read, so
    a sparse file of gigabytes, or one growing while read, costs no more)."""
    with open_regular_file(path, follow_links=follow_links) as handle:
        st = os.fstat(handle.fileno())
        if max_bytes is None:
            return st, handle.read()
        data = handle.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise FileTooLargeError(
                f"{path} is {max(st.st_size, len(data)):,} bytes, over the {max_bytes:,} read"
            )
        return st, data


def read_regular_text(
    path: Path | str,
    *,
    encoding: str = "utf-8",
    max_bytes: int | None = None,
    follow_links: bool = True,
) -> str:
    """``path``'s text (see ``read_regular_file``)."""
    return read_regular_file(path, max_bytes=max_bytes, follow_links=follow_links)[1].decode(
        encoding
    )


def read_bytes_or_none(path: Path | str, *, max_bytes: int | None = None) -> bytes | None:
    """``path``'s bytes, None when there is no file (``read_regular_file`` otherwise)."""
    try:
        return read_regular_file(path, max_bytes=max_bytes)[1]
    except FileNotFoundError:
        return None


def open_appending(path: Path | str) -> int:
    """A descriptor appending to ``path`` at its own name (a log file, opened again at each
    rotation), made when there is none: never through a symlink there, nor blocking on a FIFO
    (a writer's open waits for a reader), and only a regular file; each refusal an ``OSError``
    saying what stands there."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OSError(exc.errno, "a symlink, never written through", str(path)) from None
        if exc.errno == errno.ENXIO:  # a FIFO no one reads
            raise not_a_regular_file(path, os.lstat(path).st_mode) from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise not_a_regular_file(path, mode)
        os.set_blocking(fd, True)  # O_NONBLOCK was for the open only
    except BaseException:
        os.close(fd)
        raise
    return fd


def refuse_unless_regular(path: Path, what: str = "") -> None:
    """Refuses the start unless ``path`` is a regular file or nothing, for a file written by name
    at its own place (a journal, a log): a symlink there was written through (a dangling one made
    the file it named), a FIFO held the start, a folder was a traceback. A symlinked folder above
    it (the logs on another disk) is followed, as any folder. ``what`` prefixes the path."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISLNK(mode):
        raise RefuseToStartError(
            f"{what}{path} is a symlink: it is written at its own name, never through a link "
            "(link the logs folder instead); move it away and start again"
        )
    if not stat.S_ISREG(mode):
        raise RefuseToStartError(
            f"{what}{not_a_regular_file(path, mode)}: move it away and start again"
        )


__all__ = [
    "FileTooLargeError",
    "SymlinkRefusedError",
    "blocks_within",
    "not_a_regular_file",
    "open_appending",
    "open_regular_file",
    "open_regular_text",
    "read_bytes_or_none",
    "read_regular_file",
    "read_regular_text",
    "refuse_unless_regular",
]
