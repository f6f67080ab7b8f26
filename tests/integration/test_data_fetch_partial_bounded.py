"""``vigil data fetch`` over a partial file (``<out>/.partial/``) a killed fetch left ending in a
gigabyte of zeros (a crash's extension, here a sparse file): it was read whole and decoded before
its rows were checked, two gigabytes at the fetch's start. A partial file past the most a data
file may hold (``DATA_FILE_MAX_BYTES``) is now refused naming it (exit 78), kept as it is.

The fetch runs in a child process whose address space is capped: the old read died there of
``MemoryError`` instead of taking the machine's memory."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes.capped_child import CLI, GIGABYTE, run_capped, sparse_size

from core.errors import EXIT_REFUSE_TO_START

_MEMORY_LIMIT = 1 << 30
_HEADER = b"open_time_ms,open,high,low,close,volume\r\n"
_ROW = b"1740787200000,84000.1,84100.0,83900.5,84050.0,12.5\r\n"


@pytest.mark.timeout(120)
def test_a_partial_file_of_a_gigabyte_is_refused_naming_it_within_bounded_memory(
    tmp_path: Path,
) -> None:
    partial = tmp_path / "out" / ".partial" / "BTCUSDT-5m.csv"
    partial.parent.mkdir(parents=True)
    partial.write_bytes(_HEADER + _ROW)
    sparse_size(partial, GIGABYTE)
    argv = ["--state-dir", str(tmp_path / "state"), "data", "fetch", "--tickers", "BTC/USDT"]
    argv += ["--from", "2025-03-01", "--to", "2025-03-02", "--out", str(tmp_path / "out")]
    argv += ["--exchange-url", "http://127.0.0.1:9", "--no-funding"]
    done = run_capped(CLI, *argv, limit_bytes=_MEMORY_LIMIT)
    assert done.returncode == EXIT_REFUSE_TO_START, done.stderr[-3000:]
    assert str(partial) in done.stderr and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert partial.stat().st_size == GIGABYTE
