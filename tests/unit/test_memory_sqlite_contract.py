"""The MemoryStore contract on the embedded SQLite store, plus what only a file store has."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from contract.memory_contract import MemoryStoreContract, make_insight, make_trade
from memory.port import StoreUnavailableError
from memory.sqlite_store import SCHEMA_VERSION, SqliteMemoryStore


class TestSqliteMemoryStore(MemoryStoreContract):
    @pytest.fixture
    async def store(self, tmp_path: Path) -> AsyncIterator[SqliteMemoryStore]:
        store = SqliteMemoryStore(tmp_path / "memory.db")
        yield store
        await store.close()


async def test_reopen_keeps_everything_and_the_schema_version(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    store = SqliteMemoryStore(path)
    await store.put_trade(make_trade(1))
    await store.close()
    again = SqliteMemoryStore(path)
    assert again.schema_version() == SCHEMA_VERSION
    assert (await again.counts())["trades"] == 1
    await again.close()


async def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    SqliteMemoryStore(path)
    with sqlite3.connect(path) as db:
        db.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
    with pytest.raises(StoreUnavailableError, match="schema 99"):
        SqliteMemoryStore(path)


async def test_another_process_write_is_seen_by_retrieval(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    daemon, cli = SqliteMemoryStore(path), SqliteMemoryStore(path)
    from memory.port import CandidateQuery

    assert await daemon.candidates(CandidateQuery(ticker="SOL/USDT")) == []  # index built, empty
    await cli.put_insight(make_insight("a person's lesson added from the CLI", kind="person"))
    found = await daemon.candidates(CandidateQuery(ticker="SOL/USDT"))
    assert len(found) == 1
    await daemon.close()
    await cli.close()


def test_not_a_database_is_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreUnavailableError):
        SqliteMemoryStore(path)
