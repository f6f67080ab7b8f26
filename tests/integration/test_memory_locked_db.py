"""memory.db write-locked by another process (``vigil memory`` beside the daemon, or ``sqlite3``
in a BEGIN IMMEDIATE): the store's calls run on the event loop, so a write waits the busy timeout
there. It was 5 s per statement: every task of the daemon (the feed, the gate, the API) stood still
that long at each try of the write-back. Now it waits a short while, the write stays pending in
the outbox, and the next wake-up writes it."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from fakes.memory_support import T0, open_and_exit
from fakes.virtual_time import drive

from core.clock import VirtualClock
from memory.config import MemoryConfig
from memory.embeddings import HashedNgramEmbedder
from memory.outbox import MemoryOutbox
from memory.sqlite_store import SqliteMemoryStore
from memory.writeback import MemoryWriter

#: the busy timeout the store had: a loop stalled a fraction of it is a stall we must not have
OLD_BUSY_TIMEOUT_SECS = 5.0


async def _longest_gap(done: asyncio.Event, gaps: list[float]) -> None:
    """How long the loop went without running this task (its own sleeps are 10 ms)."""
    loop = asyncio.get_running_loop()
    last = loop.time()
    while not done.is_set():
        await asyncio.sleep(0.01)
        now = loop.time()
        gaps.append(now - last)
        last = now


async def test_a_write_lock_held_elsewhere_does_not_stall_the_loop(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    store = SqliteMemoryStore(path)
    clock = VirtualClock(T0)
    writer = MemoryWriter(
        clock, store, MemoryOutbox(tmp_path / "o.jsonl"), MemoryConfig(), HashedNgramEmbedder()
    )
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # the write lock, held as a person's sqlite3 holds it
    open_and_exit(writer, 0)
    done, gaps = asyncio.Event(), list[float]()
    probe = asyncio.create_task(_longest_gap(done, gaps))
    await asyncio.sleep(0.02)  # the probe has looked at the loop once
    try:
        flushed = await drive(clock, writer.flush())  # the retries sleep on the virtual clock
    finally:
        done.set()
        await probe
    assert flushed == 0
    assert writer.pending() == 1 and writer.stats.store_failures == 1
    assert max(gaps) < OLD_BUSY_TIMEOUT_SECS / 5, max(gaps)

    other.execute("COMMIT")
    other.close()
    assert await writer.flush() == 1  # nothing lost: written once the lock is let go
    assert writer.pending() == 0
    await store.close()
