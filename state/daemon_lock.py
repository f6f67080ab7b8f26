"""One daemon per state dir: a second ``vigil run`` on the same folder (a second ``docker run`` on
the same volume, ``make run`` in another terminal) would place every order twice, append to the
same journals and overwrite the other's ``runner_state.json``.

The daemon holds an exclusive ``flock`` on ``<state dir>/daemon.lock`` while it runs. The kernel
drops it when the process ends, however it ends (SIGKILL, a crash, an OOM kill), so a stale file
never blocks a restart; the file stays, holding who took it last, for the refusal to name.
Commands that run beside the daemon (``vigil trading``, ``memory``, ``status``, the API) do not
take it: they are meant to. ``vigil serve`` takes it: a daemon started on a folder it served took
over its ``api.json``, and serve's stop then deleted the daemon's (its API lost to ``vigil status``).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import socket
from datetime import UTC, datetime
from pathlib import Path

from core.errors import RefuseToStartError

LOCK_FILE_NAME = "daemon.lock"


class DaemonLock:
    """The state dir's lock, held from ``acquire`` until ``release`` or the process ends."""

    def __init__(self, state_dir: Path, holder: str = "daemon") -> None:
        self.path = state_dir / LOCK_FILE_NAME
        self.holder = holder  # what the refusal of another calls this one
        self._fd: int | None = None

    def acquire(self, *, needs_the_file: bool = True) -> None:
        """Take the lock, or ``RefuseToStartError`` naming the process that holds it. Without
        ``needs_the_file``, a lock file that cannot be made (a read-only folder) is no refusal:
        nothing is locked."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # never through a symlink: the file it named was cut to the holder's line
            flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
            fd = os.open(self.path, flags, 0o644)
        except OSError as exc:
            if not needs_the_file and exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
                return
            if exc.errno == errno.ELOOP:
                raise RefuseToStartError(
                    f"{self.path} is a symlink: the lock file is the state dir's own; remove it"
                ) from None
            raise RefuseToStartError(
                f"cannot create {self.path} ({exc.strerror or exc}): the state dir must be a "
                "writable folder"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # BlockingIOError: held; anything else: no lock to be had either
            holder = _read_holder(fd)
            os.close(fd)
            raise RefuseToStartError(
                f"another vigil ({holder}) is running on the state dir "
                f"{self.path.parent}: two daemons would place every order twice, and a daemon "
                "beside vigil serve would lose its API to it. Stop it first, or give this one "
                "its own --state-dir"
            ) from None
        self._fd = fd
        _write_holder(fd, self.holder)

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)  # closing drops the flock

    def __enter__(self) -> DaemonLock:
        self.acquire()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.release()


def _write_holder(fd: int, holder: str) -> None:
    started = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    text = f"{holder}, pid {os.getpid()} on {socket.gethostname()}, started {started}\n"
    with contextlib.suppress(OSError):  # only words for a refusal: the lock is what counts
        os.ftruncate(fd, 0)
        os.pwrite(fd, text.encode(), 0)


def _read_holder(fd: int) -> str:
    try:
        text = os.pread(fd, 200, 0).decode("utf-8", "replace").strip()
    except OSError:
        text = ""
    printable = "".join(ch if ch.isprintable() else "?" for ch in text)
    return printable or "its pid is not recorded"
