"""A data-dir CSV (``.csv.gz`` or plain) opened for pandas, refused when it holds more than any
data file: pandas read a gzip bomb whole (a few hundred kB inflating to gigabytes), exhausting
memory in ``vigil replay``, ``vigil sim`` and ``vigil data check``.

A gzip file is inflated once without keeping anything, to count its size, and only then handed
to pandas from the start (both reads from one open file, so the file counted is the file read).
"""

from __future__ import annotations

import contextlib
import gzip
import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, Final

from core.regular_file import FileTooLargeError, blocks_within, open_regular_file

#: the most a data file may hold, inflated: about 9 years of 1m bars (a year of 5m bars, the
#: largest bundled file, is 6.7 MB), the largest CSV an archive import takes (market.archive)
DATA_FILE_MAX_BYTES: Final = 256 << 20


@contextlib.contextmanager
def open_data_csv(
    path: Path, max_bytes: int = DATA_FILE_MAX_BYTES
) -> Iterator[BinaryIO | gzip.GzipFile]:
    """``path``'s CSV bytes, inflated when its name ends in ``.gz``. ``FileTooLargeError`` (an
    OSError, its message without the path: the caller names the file) when it holds more than
    ``max_bytes``; a FIFO or a folder in its place is refused by ``open_regular_file``; a damaged
    gzip raises as ``gzip`` does (OSError, EOFError, zlib.error)."""
    with open_regular_file(path) as raw:
        if not path.name.endswith(".gz"):
            size = os.fstat(raw.fileno()).st_size
            if size > max_bytes:
                raise FileTooLargeError(f"{size:,} bytes, over the {max_bytes >> 20} MiB read")
            yield raw
            return
        with gzip.GzipFile(fileobj=raw, mode="rb") as counting:
            for _ in blocks_within(counting, max_bytes):  # counted, nothing kept
                pass
        raw.seek(0)
        with gzip.GzipFile(fileobj=raw, mode="rb") as inflating:
            yield inflating


__all__ = ["DATA_FILE_MAX_BYTES", "open_data_csv"]
