"""memory.outbox: the memory's write-back queue on the state outbox (one mechanism with the exits
outbox): trades acknowledged per consumer, open entries rebuilt on start, the old SQLite outbox
imported once."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import orjson
import pytest

from memory.outbox import MemoryOutbox
from state.outbox import Outbox


def test_trades_wait_until_acknowledged_and_survive_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "outbox" / "memory.jsonl"
    outbox = MemoryOutbox(path)
    outbox.put_entry("SOL/USDT", {"entry_ms": 1, "entry_price": 100.0, "fees_usd": 0.1})
    outbox.put_entry("SOL/USDT", {"entry_ms": 1, "entry_price": 100.0, "fees_usd": 0.3})
    outbox.put_entry("BTC/USDT", {"entry_ms": 2, "entry_price": 90_000.0})
    outbox.add("t-sol-1", {"exit_ms": 5, "ticker": "SOL/USDT"})
    outbox.drop_entry("SOL/USDT")
    outbox.add("t-sol-1", {"exit_ms": 5, "ticker": "SOL/USDT"})  # seen twice: written once
    outbox.add("t-eth-1", {"exit_ms": 6, "ticker": "ETH/USDT"})
    assert [key for key, _ in outbox.pending()] == ["t-sol-1", "t-eth-1"]
    outbox.ack("t-sol-1")

    again = MemoryOutbox(path)  # a restart
    assert [key for key, _ in again.pending()] == ["t-eth-1"] and again.pending_count() == 1
    assert again.entry("SOL/USDT") is None  # closed
    assert again.entry("BTC/USDT") == {"entry_ms": 2, "entry_price": 90_000.0}  # still open
    again.ack("t-eth-1")
    assert MemoryOutbox(path).pending_count() == 0
    # the same file format and cursor as the exits outbox: a state.outbox.Outbox reads it
    plain = Outbox(path)
    plain.load()
    assert [e.kind for e in plain.entries()] == [
        "entry",
        "entry",
        "entry",
        "trade",
        "closed",
        "trade",
    ]
    assert plain.pending("store") == []


def test_the_old_sqlite_outbox_is_imported_once(tmp_path: Path) -> None:
    legacy = tmp_path / "memory_outbox.db"
    with sqlite3.connect(legacy) as db:
        db.execute("CREATE TABLE pending (key TEXT PRIMARY KEY, seq INTEGER NOT NULL, body BLOB)")
        db.execute("CREATE TABLE entries (ticker TEXT PRIMARY KEY, body BLOB NOT NULL)")
        db.execute("INSERT INTO pending VALUES ('t-1', 1, ?)", (orjson.dumps({"exit_ms": 9}),))
        db.execute("INSERT INTO entries VALUES ('ETH/USDT', ?)", (orjson.dumps({"entry_ms": 3}),))
    db.close()
    path = tmp_path / "outbox" / "memory.jsonl"
    outbox = MemoryOutbox(path, legacy_sqlite=legacy)
    assert outbox.pending() == [("t-1", {"exit_ms": 9})]
    assert outbox.entry("ETH/USDT") == {"entry_ms": 3}
    assert not legacy.exists() and (tmp_path / "memory_outbox.db.migrated").exists()
    assert MemoryOutbox(path, legacy_sqlite=legacy).pending_count() == 1  # not imported twice


def test_an_entry_row_edited_out_of_shape_is_left_out_and_the_rest_read(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A row whose payload lost its ticker or body (a hand edit, another program's line) ended
    the daemon's start in a KeyError traceback."""
    path = tmp_path / "outbox" / "memory.jsonl"
    outbox = MemoryOutbox(path)
    outbox.put_entry("SOL/USDT", {"entry_ms": 1, "entry_price": 100.0})
    outbox.put_entry("BTC/USDT", {"entry_ms": 2, "entry_price": 90_000.0})
    outbox.put_entry("ETH/USDT", {"entry_ms": 3, "entry_price": 2_000.0})
    outbox.drop_entry("ETH/USDT")
    outbox.add("t-eth-1", {"exit_ms": 6, "ticker": "ETH/USDT"})
    edited = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    assert [row["kind"] for row in edited] == ["entry", "entry", "entry", "closed", "trade"]
    del edited[0]["payload"]["ticker"]  # SOL's entry
    edited[1]["payload"]["body"] = "gone"  # BTC's
    edited[3]["payload"] = {}  # ETH's close
    path.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in edited))

    with caplog.at_level(logging.WARNING, logger="memory.outbox"):
        again = MemoryOutbox(path)
    assert again.entry("SOL/USDT") is None and again.entry("BTC/USDT") is None
    assert again.entry("ETH/USDT") == {"entry_ms": 3, "entry_price": 2_000.0}  # no close read
    assert [key for key, _ in again.pending()] == ["t-eth-1"]
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 3 and all("left out (kept in the file)" in line for line in said)
