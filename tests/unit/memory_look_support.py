"""Counting a SQLite memory store's looks for other connections' writes."""

from __future__ import annotations

from collections.abc import Callable

from memory.sqlite_store import SqliteMemoryStore


def count_looks(store: SqliteMemoryStore) -> Callable[[], int]:
    """Counts the store's looks for other connections' writes from now on: each reads the
    WAL-index header (and asks PRAGMA data_version when the header has changed)."""
    seen: list[bytes | None] = []
    read = store._wal.read

    def counted() -> bytes | None:
        header = read()
        seen.append(header)
        return header

    store._wal.read = counted  # type: ignore[method-assign]

    def looks() -> int:
        return len(seen)

    return looks
