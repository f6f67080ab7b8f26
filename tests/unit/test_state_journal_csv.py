"""CsvJournal: rows under one header written once, torn rows and headers repaired, cells that
stay one line (the JSONL journal: ``test_state_journal.py``)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from core.clock import VirtualClock
from core.errors import RefuseToStartError
from state.journal import (
    CsvJournal,
    JournalHeaderMismatchError,
    JournalRecordError,
    read_csv_rows,
)

EPOCH_MS = 1_740_000_000_000  # 2025-02-19T21:20:00Z
TRADE_COLUMNS = ("time_ms", "ticker", "side", "qty", "price", "fee", "client_order_id")


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock(epoch_ms=EPOCH_MS)


def _trade(i: int) -> dict[str, Any]:
    return {
        "time_ms": EPOCH_MS + i,
        "ticker": "BTC/USDT",
        "side": "buy",
        "qty": 0.001 * (i + 1),
        "price": 97000.5,
        "fee": None,
        "client_order_id": f"vigil-{i}",
    }


# --- CSV ---------------------------------------------------------------------------------------


def test_csv_rows_follow_the_header(tmp_path: Path) -> None:
    path = tmp_path / "logs" / "trades.csv"
    with CsvJournal(path, TRADE_COLUMNS, fsync=True) as journal:
        journal.append(_trade(0))
        journal.append({**_trade(1), "client_order_id": 'has, comma and "quotes"'})
    lines = path.read_text().splitlines()
    assert lines[0] == "time_ms,ticker,side,qty,price,fee,client_order_id"
    assert lines[1] == f"{EPOCH_MS},BTC/USDT,buy,0.001,97000.5,,vigil-0"
    rows = read_csv_rows(path)
    assert rows[1]["client_order_id"] == 'has, comma and "quotes"'
    assert rows[0]["fee"] == ""


def test_csv_header_is_written_exactly_once_across_reopens(tmp_path: Path) -> None:
    path = tmp_path / "trades.csv"
    for i in range(3):
        with CsvJournal(path, TRADE_COLUMNS, fsync=False) as journal:
            journal.append(_trade(i))
    text = path.read_text()
    assert text.count("time_ms,ticker") == 1
    assert [r["client_order_id"] for r in read_csv_rows(path)] == ["vigil-0", "vigil-1", "vigil-2"]


def test_csv_header_only_file_gets_no_second_header(tmp_path: Path) -> None:
    path = tmp_path / "trades.csv"
    CsvJournal(path, TRADE_COLUMNS, fsync=False).close()
    CsvJournal(path, TRADE_COLUMNS, fsync=False).close()
    assert path.read_text() == ",".join(TRADE_COLUMNS) + "\n"


def test_csv_torn_row_is_repaired(tmp_path: Path, clock: VirtualClock) -> None:
    path = tmp_path / "trades.csv"
    with CsvJournal(path, TRADE_COLUMNS, fsync=False) as journal:
        journal.append(_trade(0))
    with path.open("ab") as fh:
        fh.write(b"1740000000001,ETH/US")
    with CsvJournal(path, TRADE_COLUMNS, fsync=False, clock=clock) as journal:
        assert journal.torn_fragment_path is not None
        assert journal.torn_fragment_path.read_bytes() == b"1740000000001,ETH/US"
        journal.append(_trade(1))
    assert [r["client_order_id"] for r in read_csv_rows(path)] == ["vigil-0", "vigil-1"]


def test_csv_torn_header_is_rewritten(tmp_path: Path, clock: VirtualClock) -> None:
    path = tmp_path / "trades.csv"
    path.write_bytes(b"time_ms,tick")
    with CsvJournal(path, TRADE_COLUMNS, fsync=False, clock=clock) as journal:
        journal.append(_trade(0))
    assert path.read_text().splitlines()[0] == ",".join(TRADE_COLUMNS)


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"drop": "fee"}, r"missing \['fee'\], unexpected none"),
        ({"add": "venue"}, r"missing none, unexpected \['venue'\]"),
    ],
)
def test_csv_rows_must_have_exactly_the_columns(
    tmp_path: Path, change: dict[str, str], problem: str
) -> None:
    row = _trade(0)
    if "drop" in change:
        del row[change["drop"]]
    else:
        row[change["add"]] = "binance"
    path = tmp_path / "trades.csv"
    refused = pytest.raises(JournalRecordError, match=problem)
    with CsvJournal(path, TRADE_COLUMNS, fsync=False) as journal, refused:
        journal.append(row)
    assert path.read_text().count("\n") == 1  # header only


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (math.nan, "finite"),
        ("two\nlines", "line break"),
        (b"bytes", "holds a bytes"),
    ],
)
def test_csv_refuses_cells_it_cannot_write_as_one_line(
    tmp_path: Path, value: Any, problem: str
) -> None:
    refused = pytest.raises(JournalRecordError, match=problem)
    with CsvJournal(tmp_path / "t.csv", TRADE_COLUMNS, fsync=False) as journal, refused:
        journal.append({**_trade(0), "price": value})


def test_csv_bool_and_float_cells_are_unambiguous(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    with CsvJournal(path, ("a", "b", "c"), fsync=False) as journal:
        journal.append({"a": True, "b": 0.1 + 0.2, "c": 10**20})
    assert path.read_text().splitlines()[1] == f"true,{0.1 + 0.2!r},{10**20}"


def test_csv_with_other_columns_refuses_to_start(tmp_path: Path) -> None:
    path = tmp_path / "trades.csv"
    with CsvJournal(path, ("a", "b"), fsync=False) as journal:
        journal.append({"a": 1, "b": 2})
    before = path.read_bytes()
    with pytest.raises(JournalHeaderMismatchError, match=r"header 'a,b'.*'a,b,c'.*Move the old"):
        CsvJournal(path, ("a", "b", "c"), fsync=False)
    assert issubclass(JournalHeaderMismatchError, RefuseToStartError)
    assert path.read_bytes() == before


@pytest.mark.parametrize("columns", [(), ("a", "a"), ("a,b",), ("",), ("x\n",)])
def test_bad_column_lists_are_refused(tmp_path: Path, columns: tuple[str, ...]) -> None:
    with pytest.raises(ValueError, match="column"):
        CsvJournal(tmp_path / "t.csv", columns, fsync=False)
