"""A ``logs/trades.csv`` ending in a gigabyte of zeros (a crash's: the file extended, the row not
written; here a sparse file) at the daemon's start: the check for a header of an older vigil
(``state.csv_widen``) read the whole file before looking at its header, so every start took that
gigabyte (and more, on an older header), before the journal's own repair moved the torn tail
aside. The header is now read first and the file only when it is the older one.

The journals are opened as the daemon opens them (``runner.journals.open_journals``) in a child
process whose address space is capped: the old read died there of ``MemoryError``."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes.capped_child import GIGABYTE, run_capped, sparse_size

from state.records import TRADE_COLUMNS

_MEMORY_LIMIT = 768 << 20
_ROW = b"1740787200000,c1,BTC/USDT,buy,0.01,84000.0,0.34,False\n"

_CHILD = """
import sys
from pathlib import Path
from core.bus import EventBus
from core.clock import VirtualClock
from runner.config import Settings
from runner.journals import open_journals
journals = open_journals(Settings(state_dir=Path(sys.argv[1])), VirtualClock(0), EventBus())
journals.trades.close()
journals.decisions.close()
print("opened")
"""


@pytest.mark.timeout(120)
def test_a_trades_file_ending_in_a_gigabyte_of_zeros_opens_within_bounded_memory(
    tmp_path: Path,
) -> None:
    state_dir = tmp_path / "state"
    trades = state_dir / "logs" / "trades.csv"
    trades.parent.mkdir(parents=True)
    kept = (",".join(TRADE_COLUMNS) + "\n").encode() + _ROW
    trades.write_bytes(kept)
    sparse_size(trades, len(kept) + GIGABYTE)
    done = run_capped(_CHILD, str(state_dir), limit_bytes=_MEMORY_LIMIT)
    assert done.returncode == 0 and done.stdout.strip() == "opened", done.stderr[-2000:]
    assert trades.read_bytes() == kept  # the torn tail moved aside by the journal's repair
