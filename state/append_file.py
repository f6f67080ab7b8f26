"""The append-only file under both journals: whole-line writes, torn-tail repair, and rotation.

Every record is one complete line written with a single ``os.write`` on an ``O_APPEND`` descriptor
(then fsync'd if configured), so a reader never sees two records interleaved. Rotation (``state.
rotation``) happens between two lines, under the same lock as the writes, so a line is never split
across segments; gzip and retention run on a thread of their own, off the decision path.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Final

import aiofiles.os

from core.clock import Clock
from state.atomic import atomic_write_bytes, fsync_dir
from state.journal_health import JournalHealth
from state.naming import unused_sibling
from state.rotation import (
    JournalRotationConfig,
    RotationDue,
    compress_segment,
    finish_interrupted,
    prune,
    rotated_name,
)
from state.segments import LINE_MAX_BYTES

log = logging.getLogger(__name__)

_TAIL_CHUNK_BYTES: Final = 1 << 16
#: never through a symlink at the journal's own name: it was appended to wherever it pointed (a
#: symlinked folder above it, the journals on another disk, is followed as usual)
_OPEN_FLAGS: Final = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW


class JournalClosedError(RuntimeError):
    """``append`` after ``close``."""


def _no_failpoint(_name: str) -> None:
    return None


class AppendOnlyFile:
    """``rotation``: rotate as configured (``first_line_ms`` reads the instant of an existing
    file's first line, for the day rule); ``failpoint``: ``core.failpoints.Failpoints.hit``."""

    def __init__(
        self,
        path: Path,
        fsync: bool,
        clock: Clock,
        health: JournalHealth,
        *,
        rotation: JournalRotationConfig | None = None,
        first_line_ms: Callable[[bytes], int | None] | None = None,
        failpoint: Callable[[str], None] = _no_failpoint,
    ) -> None:
        self.path = path
        self._fsync = fsync
        self._clock = clock
        self._health = health
        self._rotation = rotation if rotation is not None and rotation.enabled else None
        self._hit = failpoint
        self._lock = threading.Lock()  # a write and a rotation never interleave
        self._writer: ThreadPoolExecutor | None = None  # made by the first append_bytes_async
        self._packer: ThreadPoolExecutor | None = None  # gzip + retention, made by a rotation
        self._packing: list[Future[None]] = []
        path.parent.mkdir(parents=True, exist_ok=True)
        if self._rotation is not None:
            finish_interrupted(path, self._rotation.compress)
        self.torn_fragment_path = repair_torn_tail(path, clock.now_ms())
        created = not path.exists()
        self._fd: int | None = os.open(path, _OPEN_FLAGS, 0o666)
        if created:
            fsync_dir(path.parent)  # the new file's name must survive a crash too
        self._due: RotationDue | None = None
        if self._rotation is not None:
            first = self.first_line()
            started = None if first is None or first_line_ms is None else first_line_ms(first)
            self._due = RotationDue(self._rotation, started)

    def append_bytes(self, data: bytes) -> None:
        now_ms = self._clock.now_ms()
        try:
            self._write(data, now_ms)
        except OSError as exc:
            self._health.note_write_failed(self.path, exc, self._clock.now_ms())
            raise
        self._health.note_write_ok(self._clock.now_ms())

    async def append_bytes_async(self, data: bytes) -> None:
        """The write and fsync on this file's own writer thread, through aiofiles: one thread, so
        lines keep their order, and ``close`` waits for it. Without fsync a write is microseconds
        and stays on the loop, where its place among other events is deterministic (replay)."""
        if not self._fsync:
            self.append_bytes(data)
            return
        self._open_fd()
        now_ms = self._clock.now_ms()  # read on the loop: the rotation's day is the clock's
        if self._writer is None:
            self._writer = ThreadPoolExecutor(1, thread_name_prefix=f"journal-{self.path.name}")
        try:
            # shielded: a cancelled decision still has its line written whole
            await asyncio.shield(_write_off_loop(self._write, data, now_ms, executor=self._writer))
        except OSError as exc:
            self._health.note_write_failed(self.path, exc, self._clock.now_ms())
            raise
        self._health.note_write_ok(self._clock.now_ms())

    def _write(self, data: bytes, now_ms: int) -> None:
        with self._lock:
            fd = self._open_fd()
            if self._due is not None and self._due.check(os.fstat(fd).st_size, len(data), now_ms):
                fd = self._rotate(fd, now_ms)
            written = os.write(fd, data)
            if written != len(data):
                # only on a full disk or similar: take the partial line back so no reader sees it
                os.ftruncate(fd, os.fstat(fd).st_size - written)
                raise OSError(f"short write to {self.path}: {written} of {len(data)} bytes")
            if self._fsync:
                os.fsync(fd)

    def _rotate(self, fd: int, now_ms: int) -> int:
        """Close the live segment under its rotated name and open a new live file; its fd."""
        assert self._rotation is not None
        if self._fsync:
            os.fsync(fd)
        closed = rotated_name(self.path, now_ms)
        os.rename(self.path, closed)  # atomic: each line is in exactly one file throughout
        fsync_dir(self.path.parent)
        self._hit("journal_mid_rotation")
        new_fd = os.open(self.path, _OPEN_FLAGS, 0o666)
        fsync_dir(self.path.parent)
        self._fd = new_fd
        os.close(fd)
        log.info("rotated %s to %s", self.path.name, closed.name)
        if self._packer is None:
            self._packer = ThreadPoolExecutor(1, thread_name_prefix=f"gzip-{self.path.name}")
        self._packing = [f for f in self._packing if not f.done()]
        self._packing.append(self._packer.submit(self._pack, closed, now_ms))
        return new_fd

    def _pack(self, closed: Path, now_ms: int) -> None:
        """Gzip and prune after a rotation; a failure is logged (the plain segment still reads
        whole, and the next open retries the gzip), never raised into a write."""
        assert self._rotation is not None
        try:
            if self._rotation.compress:
                compress_segment(closed, self._hit)
            prune(self.path, self._rotation, now_ms)
        except OSError:
            log.exception("could not compress or prune the rotated segment %s", closed)

    def wait_packed(self) -> None:
        """Block until the gzip and pruning of every rotation so far are done (tests, close)."""
        for future in list(self._packing):
            future.result()

    def first_line(self) -> bytes | None:
        """The first line including its newline, or None for an empty file. At most
        ``LINE_MAX_BYTES`` are read: a longer run without a newline (a sparse file's zeros) is no
        line, and was held whole (a gigabyte of zeros, two gigabytes at start)."""
        fd = self._open_fd()
        chunks: list[bytes] = []
        offset = 0
        while offset < LINE_MAX_BYTES and (chunk := os.pread(fd, _TAIL_CHUNK_BYTES, offset)):
            newline = chunk.find(b"\n")
            if newline >= 0:
                chunks.append(chunk[: newline + 1])
                break
            chunks.append(chunk)
            offset += len(chunk)
        return b"".join(chunks) or None

    def flush(self) -> None:
        os.fsync(self._open_fd())

    def close(self) -> None:
        if self._fd is None:
            return
        if self._writer is not None:  # let a line in flight finish before the fd goes
            self._writer.shutdown(wait=True)
            self._writer = None
        if self._packer is not None:  # a segment being gzipped is finished, not left half-done
            self._packer.shutdown(wait=True)
            self._packer = None
        fd, self._fd = self._fd, None
        try:
            os.fsync(fd)
        except OSError as exc:  # what was written may not be on disk: as loud as a failed write
            self._health.note_write_failed(self.path, exc, self._clock.now_ms())
            raise
        finally:
            os.close(fd)

    def _open_fd(self) -> int:
        if self._fd is None:
            raise JournalClosedError(f"journal {self.path} is closed")
        return self._fd


_write_off_loop = aiofiles.os.wrap(lambda write, data, now_ms: write(data, now_ms))


def repair_torn_tail(path: Path, now_ms: int) -> Path | None:
    """Move an incomplete last line of ``path`` to ``<name>.torn-<timestamp>``; its path or None.

    The fragment is made durable before the journal is truncated, so a crash during the repair
    loses nothing (at worst the fragment exists twice).
    """
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)  # it cut the file linked
    except FileNotFoundError:
        return None
    try:
        size = os.fstat(fd).st_size
        keep = _end_of_last_complete_line(fd, size)
        if keep == size:
            return None
        # no line is longer: more is the zeros a crash extended the file with (read whole, a
        # sparse gigabyte of them took that much memory and disk at start)
        fragment = os.pread(fd, min(size - keep, LINE_MAX_BYTES), keep)
        fragment_path = unused_sibling(path, "torn", now_ms)
        atomic_write_bytes(fragment_path, fragment)
        os.ftruncate(fd, keep)
        os.fsync(fd)
    finally:
        os.close(fd)
    log.warning(
        "%s ended with an incomplete line (%d bytes, left by an interrupted write); "
        "moved %s to %s and truncated the journal to its last complete line",
        path,
        size - keep,
        "it" if len(fragment) == size - keep else f"its first {len(fragment)} bytes",
        fragment_path,
    )
    return fragment_path


def _end_of_last_complete_line(fd: int, size: int) -> int:
    """Offset just past the last newline (0 if there is none), reading backwards in chunks."""
    end = size
    while end > 0:
        start = max(0, end - _TAIL_CHUNK_BYTES)
        chunk = os.pread(fd, end - start, start)
        newline = chunk.rfind(b"\n")
        if newline >= 0:
            return start + newline + 1
        end = start
    return 0
