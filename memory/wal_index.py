"""Whether anything was committed to a WAL-mode SQLite file, told without a read transaction.

``PRAGMA data_version`` opens a read transaction (locks on the ``-shm`` file, SQLite's pager and
VDBE): ~3 us alone, 30-40 us of a replayed decision, with its cold caches. Every commit to a WAL
database, by any connection of any process, rewrites the WAL-index header at the start of the
``-shm`` file (https://sqlite.org/walformat.html: ``iChange`` counts the transactions), and a
reader finds the commits there. So while the header reads as it did before a look, nothing was
committed since, and that look's answer stands; when it reads otherwise (a commit, this process's
own included, a checkpoint that restarted the WAL, a header caught mid-write), the store looks.
"""

from __future__ import annotations

import mmap
import sqlite3
import sys
from pathlib import Path

#: the first of the header's two copies (a writer writes the second, then this one)
HEADER_BYTES = 48
#: the header's ``iVersion`` (the WAL-index format since SQLite 3.7.0), in native byte order
_FORMAT = (3007000).to_bytes(4, sys.byteorder)
_IS_INIT = 12  # the header's ``isInit`` byte: 1 once the header is built


class WalHeader:
    """The WAL-index header of ``path``'s database, mapped read-only; ``read()`` is None when it
    cannot tell (not in WAL mode, no ``-shm`` file, a format it does not know): look then."""

    def __init__(self, path: Path, db: sqlite3.Connection) -> None:
        self._map: mmap.mmap | None = None
        try:
            if str(db.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
                return
            # SQLite keeps the file at its size while a connection (``db``) has it open
            with open(f"{path}-shm", "rb") as shm:
                self._map = mmap.mmap(shm.fileno(), HEADER_BYTES, access=mmap.ACCESS_READ)
        except (OSError, ValueError, sqlite3.Error):
            self._map = None

    def read(self) -> bytes | None:
        mapped = self._map
        if mapped is None:
            return None
        header = mapped[:HEADER_BYTES]
        if header[:4] != _FORMAT or header[_IS_INIT] != 1:
            return None
        return header

    def close(self) -> None:
        if self._map is not None:
            self._map.close()
            self._map = None
