"""A FRED snapshot (``regime.fred_snapshot_dir``, ``<series>.csv``) of a gigabyte (a crash's
zeros, here a sparse file) was read whole by pandas, exhausting memory where the macro regime
loads it; past the most a data file may hold (``DATA_FILE_MAX_BYTES``) it is now refused naming
the file (``MacroDataError``), as an unreadable snapshot is.

The load runs in a child process whose address space is capped: the old read died there of
``MemoryError`` instead of taking the machine's memory."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes.capped_child import GIGABYTE, run_capped, sparse_size

_MEMORY_LIMIT = 1 << 30

_CHILD = """
import sys
from pathlib import Path
from regime.fred import MacroDataError, load_snapshot_series
try:
    load_snapshot_series(Path(sys.argv[1]), "INDPRO")
except MacroDataError as exc:
    print(exc)
"""


@pytest.mark.timeout(120)
def test_a_snapshot_of_a_gigabyte_is_refused_naming_it_within_bounded_memory(
    tmp_path: Path,
) -> None:
    snapshot = tmp_path / "INDPRO.csv"
    snapshot.write_bytes(b"observation_date,INDPRO\n2025-01-01,103.2\n")
    sparse_size(snapshot, GIGABYTE)
    done = run_capped(_CHILD, str(tmp_path), limit_bytes=_MEMORY_LIMIT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert str(snapshot) in done.stdout and "MiB" in done.stdout, done.stdout
