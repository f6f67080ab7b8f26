"""The SQLite memory file: schema, migrations, connection settings and the row codecs.

WAL journal, one transaction per write: a kill -9 loses at most the transaction in flight and never
corrupts the file (SQLite's own guarantee; tests/unit/test_memory_restart.py kills a writer). The
schema is versioned in ``meta``; ``MIGRATIONS[n]`` takes a file from version n to n + 1, and a file
from a newer vigil is refused.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from memory.model import Insight, Trade
from memory.port import StoreUnavailableError

SCHEMA_VERSION = 1
#: how long a statement waits for another process's write lock. The store's calls run on the
#: event loop (``memory.sqlite_store``): 5 s stalled every task of the daemon that long at each
#: try while ``vigil memory`` or ``sqlite3`` held the lock. A write that finds it held fails as
#: the store unavailable, and the write-back keeps it pending for the next wake-up; our own
#: writes and the CLI's last about a millisecond, so this is long enough for them.
BUSY_TIMEOUT_MS = 100

_SCHEMA_V1 = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS trades (
    trade_id TEXT PRIMARY KEY, ticker TEXT NOT NULL, regime TEXT NOT NULL, macro TEXT NOT NULL,
    entry_ms INTEGER NOT NULL, exit_ms INTEGER NOT NULL, pnl_pct REAL NOT NULL,
    holding_secs REAL NOT NULL, exit_reason TEXT NOT NULL, body TEXT NOT NULL, vector BLOB);
CREATE INDEX IF NOT EXISTS trades_ticker_regime ON trades (ticker, regime);
CREATE TABLE IF NOT EXISTS insights (
    insight_id TEXT PRIMARY KEY, kind TEXT NOT NULL, ticker TEXT, regime TEXT,
    created_ms INTEGER NOT NULL, salience REAL NOT NULL, trade_id TEXT,
    archived INTEGER NOT NULL DEFAULT 0, body TEXT NOT NULL, vector BLOB, embedding BLOB);
CREATE INDEX IF NOT EXISTS insights_ticker_kind ON insights (ticker, kind, created_ms);
CREATE INDEX IF NOT EXISTS insights_regime ON insights (regime, created_ms);
CREATE TABLE IF NOT EXISTS summarises (
    parent TEXT NOT NULL, child TEXT NOT NULL, PRIMARY KEY (parent, child));
"""
#: MIGRATIONS[n]: SQL taking schema version n to n + 1 (none yet beyond creating version 1)
MIGRATIONS: dict[int, str] = {0: _SCHEMA_V1}

#: Insight fields stored as float32 blobs, not in the JSON body
VECTOR_FIELDS = {"situation_vector", "embedding"}
#: the columns ``insight_from_row`` reads, in its order
INSIGHT_COLUMNS = "body, vector, embedding"


def connect(path: Path) -> sqlite3.Connection:
    """Open (creating or migrating) the memory file; ``StoreUnavailableError`` if it cannot be."""
    try:
        # a state dir that is a file (a mistyped --state-dir) fails here: a reason, no traceback
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreUnavailableError(f"{path}: cannot make its folder: {exc.strerror}") from exc
    try:
        db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: safe against kill -9
        db.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        _migrate(db, path)
    except sqlite3.DatabaseError as exc:
        raise StoreUnavailableError(f"{path}: {exc}") from exc
    return db


def _migrate(db: sqlite3.Connection, path: Path) -> None:
    db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
    row = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    version = 0 if row is None else _version_of(row[0], path)
    if version > SCHEMA_VERSION:
        raise StoreUnavailableError(
            f"{path} has memory schema {version}; this vigil knows up to {SCHEMA_VERSION}"
        )
    while version < SCHEMA_VERSION:
        db.execute("BEGIN IMMEDIATE")
        for statement in MIGRATIONS[version].split(";"):
            if statement.strip():
                db.execute(statement)
        version += 1
        db.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)",
            (str(version),),
        )
        db.execute("COMMIT")


def _version_of(value: object, path: Path) -> int:
    """meta's schema_version as written by a vigil: a person's '-1' asked for a migration that
    does not exist, and 'x' or 5,000 digits were int()'s ValueError past every caller's catch."""
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 9:
        return int(value)
    raise StoreUnavailableError(f"{path} has memory schema {value!r:.40}, not a version number")


def schema_version(db: sqlite3.Connection) -> int:
    row = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    return int(row[0])


def vector_of(blob: bytes | None) -> tuple[float, ...] | None:
    return None if blob is None else tuple(np.frombuffer(blob, dtype=np.float32).tolist())


def insight_from_row(row: Sequence[Any]) -> Insight:
    """An insight from (body, vector blob, embedding blob): float32 blobs keep the file ~3x
    smaller than the same floats as JSON text."""
    body = orjson.loads(row[0])
    body["situation_vector"], body["embedding"] = vector_of(row[1]), vector_of(row[2])
    return Insight.model_validate(body)


def blob_of(values: Sequence[float] | None) -> bytes | None:
    return None if values is None else np.asarray(values, dtype=np.float32).tobytes()


INSERT_TRADE = "INSERT OR IGNORE INTO trades VALUES (?,?,?,?,?,?,?,?,?,?,?)"
INSERT_INSIGHT = "INSERT OR IGNORE INTO insights VALUES (?,?,?,?,?,?,?,0,?,?,?)"


def trade_row(trade: Trade) -> tuple[Any, ...]:
    vector = trade.situation.vector if trade.situation else None
    return (
        trade.trade_id,
        trade.ticker,
        trade.regime,
        trade.macro,
        trade.entry_ms,
        trade.exit_ms,
        trade.pnl_pct,
        trade.holding_secs,
        trade.exit_reason,
        trade.model_dump_json(),
        blob_of(vector),
    )


def insight_row(insight: Insight) -> tuple[Any, ...]:
    return (
        insight.insight_id,
        insight.kind,
        insight.ticker,
        insight.regime,
        insight.created_ms,
        insight.salience,
        insight.trade_id,
        insight.model_dump_json(exclude=VECTOR_FIELDS),  # the vectors are blobs
        blob_of(insight.situation_vector),
        blob_of(insight.embedding),
    )


def bulk_insert(
    path: Path, trades: Sequence[tuple[Any, ...]], insights: Sequence[tuple[Any, ...]]
) -> None:
    """Rows (``trade_row`` / ``insight_row``) in one transaction: benchmarks and imports of many
    items (a store open on the file reloads its indexes on the next query: data_version moved)."""
    db = connect(path)
    try:
        db.execute("BEGIN IMMEDIATE")
        db.executemany(INSERT_TRADE, trades)
        db.executemany(INSERT_INSIGHT, insights)
        db.execute("COMMIT")
    finally:
        db.close()
