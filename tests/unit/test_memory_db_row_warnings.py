"""An unreadable row is warned about once per store, not once per process: the rows warned about
were one set for the whole process, so the same broken row in a second memory.db (the next run of
a sweep worker, a second state dir) was left out without a word."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from test_memory_db_edited import edit, fill

from memory.sqlite_store import SqliteMemoryStore

BROKEN = "UPDATE insights SET body='not json' WHERE rowid=1"


async def _export_warnings(path: Path, caplog: pytest.LogCaptureFixture) -> list[str]:
    caplog.clear()
    store = SqliteMemoryStore(path)
    try:
        with caplog.at_level(logging.WARNING, logger="memory.sqlite_rows"):
            await store.export()
            await store.export()  # asked again: not warned again
    finally:
        await store.close()
    return [r.getMessage() for r in caplog.records if "cannot be read" in r.getMessage()]


async def test_each_store_warns_of_its_own_broken_row_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    first, second = tmp_path / "a" / "memory.db", tmp_path / "b" / "memory.db"
    for path in (first, second):
        path.parent.mkdir()
        await fill(path)
        edit(path, BROKEN)
    assert len(await _export_warnings(first, caplog)) == 1
    assert len(await _export_warnings(second, caplog)) == 1
