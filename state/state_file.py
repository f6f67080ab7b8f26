"""``runner_state.json`` as bytes on disk, for ``state.store``: reading it whole while it may be
changing under us, the stamp ``poll`` compares, the state dir check, and writing with
``state.atomic.replace_if_holds``: by atomic exchange, which hands back exactly what it replaced,
or, where the file system cannot exchange files, by a check of the old content right before a
plain rename (logged once, and the exchange not tried again).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final, NamedTuple

from core.errors import RefuseToStartError
from core.regular_file import read_regular_file
from state.atomic import (
    ChangedWhileSavingError,
    SwapUnsupportedError,
    replace_if_holds,
    tmp_path_for,
)

# the store's parts log as one component, under the name operators already filter on
log = logging.getLogger("state.store")

#: where a person points the state dir, for the refusals that ask them to (a replay's state dir is
#: its run folder: naming only VIGIL_STATE_DIR sent a person with a bad --out to the wrong place)
STATE_DIR_SETTING = "VIGIL_STATE_DIR or --state-dir (a replay's --out)"

#: reads of a file that changes while being read are retried this many times
MAX_READ_ATTEMPTS: Final = 3

#: the most of the file that is read: a state is kilobytes (notes an edit may bring are 1 Mi
#: characters, ``state.edit_checks``). A sparse file of gigabytes left there was read whole at
#: every changed poll and held whole; past this it is refused unread (``FileTooLargeError``)
STATE_FILE_MAX_BYTES: Final = 16 << 20


class FileStamp(NamedTuple):
    """What ``poll`` compares: any write, in place or by rename, changes at least one of these."""

    mtime_ns: int
    size: int
    ino: int

    @classmethod
    def of(cls, st: os.stat_result) -> FileStamp:
        return cls(st.st_mtime_ns, st.st_size, st.st_ino)


@dataclass(frozen=True)
class FileView:
    """What the store knows the file holds. ``data is None``: there is no file.

    File times are coarse (a kernel tick, a few ms), so an in-place edit of the same size right
    after the store read or wrote the file can keep the same stamp. Until a later poll has re-read
    the bytes under an unchanged stamp (``confirmed``), the stamp alone is not trusted.
    """

    stamp: FileStamp | None
    data: bytes | None
    confirmed: bool = False


class FileInFluxError(Exception):
    """The file kept changing while it was read; read it again later."""


class StateFile:
    """One state file's reads and writes (the store decides what to write and when)."""

    def __init__(self, path: Path, *, durable: bool = True) -> None:
        """``durable=False``: writes skip fsync (``state.atomic``); a replay's choice."""
        self.path = path
        self._durable = durable
        self._swap_supported = True

    def prepare_dir(self) -> None:
        """Create the state dir and prove it writable, or refuse to start."""
        directory = self.path.parent
        try:
            directory.mkdir(parents=True, exist_ok=True)
            probe = tmp_path_for(self.path)  # named like a tmp file: a crash here is cleaned up
            os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
            probe.unlink()
        except OSError as exc:
            reason = exc.strerror or str(exc)
            raise RefuseToStartError(
                f"the state dir {directory} cannot be created or written ({reason}). Point "
                f"{STATE_DIR_SETTING} at a writable directory, or fix its ownership/permissions."
            ) from None

    def put(self, data: bytes, expected: bytes | None) -> tuple[os.stat_result, bytes | None]:
        """Write ``data``; returns the written stat and what the file held just before (by
        exchange, unchecked: the store judges what it gets back). ``ChangedWhileSavingError``
        (check-then-rename mode): the file changed from ``expected`` before the rename; look again.
        """
        return replace_if_holds(
            self.path,
            data,
            expected,
            check_before_exchange=False,
            durable=self._durable,
            exchange=self._swap_supported,
            on_swap_unsupported=self._stop_swapping,
        )

    def _stop_swapping(self, exc: SwapUnsupportedError) -> None:
        self._swap_supported = False
        log.warning(
            "cannot swap files atomically in %s (%s): saves fall back to check-then-"
            "rename, where an edit landing in the microseconds between can be lost",
            self.path.parent,
            exc,
        )

    def read_settled(self) -> tuple[FileStamp, bytes] | None:
        """The file's stamp and bytes, re-read while it changes under us; None if missing."""
        for _ in range(MAX_READ_ATTEMPTS):
            try:
                stamp, data = read_all(self.path)
                after = FileStamp.of(os.stat(self.path))
            except FileNotFoundError:
                return None
            if after == stamp:
                return stamp, data
        raise FileInFluxError(f"{self.path} kept changing while being read")


def read_all(path: Path) -> tuple[FileStamp, bytes]:
    """``read_regular_file`` with the stamp ``poll`` compares; ``FileTooLargeError`` past
    ``STATE_FILE_MAX_BYTES``."""
    st, data = read_regular_file(path, max_bytes=STATE_FILE_MAX_BYTES)
    return FileStamp.of(st), data


__all__ = [
    "MAX_READ_ATTEMPTS",
    "STATE_DIR_SETTING",
    "STATE_FILE_MAX_BYTES",
    "ChangedWhileSavingError",
    "FileInFluxError",
    "FileStamp",
    "FileView",
    "StateFile",
    "read_all",
]
