"""Widen a CSV journal written by an older vigil whose header lacked columns added at the end.

``logs/trades.csv`` gained ``fee_estimated``: a state dir from before has the old header, which the
journal would refuse (``JournalHeaderMismatchError``). The old rows are kept as they were, each
with an empty cell per new column (empty = not recorded then), and the file is replaced atomically.
"""

from __future__ import annotations

import csv
import io
import logging
from collections.abc import Sequence
from pathlib import Path

from core.errors import RefuseToStartError
from core.regular_file import open_regular_file
from state.atomic import atomic_write_bytes

log = logging.getLogger(__name__)


def widen_csv_columns(path: Path, older: Sequence[str], columns: Sequence[str]) -> bool:
    """Rewrite ``path`` from header ``older`` to ``columns`` (``older`` must be a prefix).

    Returns True when the file was rewritten; False when it is absent or has another header (the
    journal then judges it as usual). An incomplete last line is left as it is, for the journal's
    own repair.
    """
    older, columns = tuple(older), tuple(columns)
    if columns[: len(older)] != older or len(columns) == len(older):
        raise ValueError(f"{older} is not a strict prefix of {columns}")
    header = _line(older)
    try:
        handle = open_regular_file(path)
    except FileNotFoundError:
        return False
    except IsADirectoryError as exc:  # a FIFO's read hung the start, past SIGTERM
        raise RefuseToStartError(f"{exc}: move it away and start again") from None
    with handle:
        # the header first: the file was read whole at every start, a crash's gigabyte of zeros
        # at its end with it
        if handle.read(len(header)) != header:
            return False
        body = handle.read()
    complete, _, tail = body.rpartition(b"\n")
    padding = b"," * (len(columns) - len(older))
    rows = [line + padding + b"\n" for line in complete.split(b"\n")] if complete else []
    atomic_write_bytes(path, _line(columns) + b"".join(rows) + tail)
    log.warning(
        "%s had the columns of an older vigil; added %s (empty on its %d earlier rows)",
        path,
        ", ".join(columns[len(older) :]),
        len(rows),
    )
    return True


def _line(cells: Sequence[str]) -> bytes:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerow(cells)
    return buffer.getvalue().encode("utf-8")
