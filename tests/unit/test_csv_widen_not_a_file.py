"""``vigil run`` on a state dir with a FIFO at logs/trades.csv: the start read it whole to widen an
older header (``state.csv_widen``) with a plain ``read_bytes``, which waits on a FIFO for a
writer: the daemon hung at start, and SIGINT and SIGTERM could not stop it (Python retries the
interrupted open). The start is now refused naming the file (exit 78), the FIFO left as it is."""

from __future__ import annotations

import os
from pathlib import Path

from fakes.fifo import outcome_beside_fifo

from core.errors import RefuseToStartError
from state.csv_widen import widen_csv_columns
from state.records import TRADE_COLUMNS, TRADE_COLUMNS_V1


def test_a_fifo_at_the_trades_journal_refuses_the_start(tmp_path: Path) -> None:
    path = tmp_path / "trades.csv"
    os.mkfifo(path)
    got = outcome_beside_fifo(
        lambda: widen_csv_columns(path, TRADE_COLUMNS_V1, TRADE_COLUMNS), path
    )
    assert isinstance(got, RefuseToStartError), got
    assert f"{path} is not a regular file (a FIFO)" in str(got)
    assert path.is_fifo()
