"""The memory's durable outbox: exits waiting to be written to the store, and open entries.

A SQLite file of its own (``memory_outbox.db``, WAL, synchronous=FULL): a row is committed when the
exit is seen on the bus (inline, ~1 ms) and deleted only after the store acknowledged the write, so a
slow or down store (Neo4j) delays nothing and loses nothing, and a kill -9 loses at most the row in
flight. It could share the exit outbox of ``state/outbox.py`` once that lands: both are "append at the
event, ack after the side effect"; this one also keeps open entries (price, situation, decision) so
a Trade written after a restart still knows how it began.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import orjson

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS pending (key TEXT PRIMARY KEY, seq INTEGER NOT NULL, body BLOB)",
    "CREATE TABLE IF NOT EXISTS entries (ticker TEXT PRIMARY KEY, body BLOB NOT NULL)",
)


class MemoryOutbox:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        for statement in _SCHEMA:
            self._db.execute(statement)
        row = self._db.execute("SELECT COALESCE(MAX(seq), 0) FROM pending").fetchone()
        self._seq = int(row[0])

    def add(self, key: str, body: dict[str, Any]) -> None:
        """Idempotent on ``key``: the same exit seen twice is written once."""
        self._seq += 1
        self._db.execute(
            "INSERT OR IGNORE INTO pending VALUES (?,?,?)", (key, self._seq, orjson.dumps(body))
        )

    def pending(self) -> list[tuple[str, dict[str, Any]]]:
        rows = self._db.execute("SELECT key, body FROM pending ORDER BY seq").fetchall()
        return [(key, orjson.loads(body)) for key, body in rows]

    def pending_count(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM pending").fetchone()[0])

    def ack(self, key: str) -> None:
        self._db.execute("DELETE FROM pending WHERE key=?", (key,))

    def put_entry(self, ticker: str, body: dict[str, Any]) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO entries VALUES (?,?)", (ticker, orjson.dumps(body))
        )

    def entry(self, ticker: str) -> dict[str, Any] | None:
        row = self._db.execute("SELECT body FROM entries WHERE ticker=?", (ticker,)).fetchone()
        return orjson.loads(row[0]) if row else None

    def drop_entry(self, ticker: str) -> None:
        self._db.execute("DELETE FROM entries WHERE ticker=?", (ticker,))

    def close(self) -> None:
        self._db.close()
