"""The debate's long-term memory contract on both adapters: in the process, and the memory graph
(SQLite store, the memory writer's filters), plus what only the graph does: it survives a restart,
tags whose opinion a memory is, and writes nothing without a writer (``write_back`` off)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agent.debate_memory import InProcessMemory
from agent.debate_store import GraphDebateMemory
from contract.debate_memory_contract import T0, LongTermMemoryContract, entry, query
from core.clock import VirtualClock
from memory.config import MemoryConfig
from memory.embeddings import HashedNgramEmbedder
from memory.outbox import MemoryOutbox
from memory.sqlite_store import SqliteMemoryStore
from memory.writeback import MemoryWriter


def graph(path: Path, *, write: bool = True) -> tuple[GraphDebateMemory, SqliteMemoryStore]:
    store = SqliteMemoryStore(path / "memory.db")
    config, embedder = MemoryConfig(), HashedNgramEmbedder()
    writer = MemoryWriter(
        VirtualClock(epoch_ms=T0), store, MemoryOutbox(path / "outbox.db"), config, embedder
    )
    accept = writer.accept if write else None
    return GraphDebateMemory(store, config.retrieval, embedder, accept), store


class TestInProcessMemory(LongTermMemoryContract):
    @pytest.fixture
    def memory(self) -> InProcessMemory:
        return InProcessMemory()


class TestGraphDebateMemory(LongTermMemoryContract):
    @pytest.fixture
    async def memory(self, tmp_path: Path) -> AsyncIterator[GraphDebateMemory]:
        memory, store = graph(tmp_path)
        yield memory
        await store.close()


async def test_the_graph_memory_survives_a_restart_and_says_whose_opinion(tmp_path: Path) -> None:
    memory, store = graph(tmp_path)
    assert await memory.remember(
        entry("Bulls overstated the ETF inflow story this week.", role="bull")
    )
    assert await memory.remember(
        entry("Stops under the 4h low saved the SOL long.", role="reflection", ticker="SOL/USDT")
    )
    await store.close()
    again, store = graph(tmp_path)
    found = await again.recall(query("ETF inflow story stops under the 4h low", k=5))
    assert {(f.role, f.kind) for f in found} == {("bull", "debate"), ("reflection", "reflection")}
    bull = next(f for f in found if f.role == "bull")
    assert bull.text.startswith("[bull] ")
    kinds = {i.kind for i in await store.list_insights(limit=10)}
    assert kinds == {"debate", "reflection"}  # the store's own kinds: any reader finds them
    await store.close()


async def test_a_read_only_graph_memory_writes_nothing(tmp_path: Path) -> None:
    memory, store = graph(tmp_path, write=False)
    assert not await memory.remember(entry("A lesson that a dry run must not keep."))
    assert await store.list_insights() == []
    await store.close()


async def test_a_long_output_is_cut_at_a_sentence_to_the_store_s_300_chars(tmp_path: Path) -> None:
    memory, store = graph(tmp_path)
    text = "Funding was hot and the squeeze failed. " * 12
    assert await memory.remember(entry(text.strip()))
    (stored,) = await store.list_insights()
    assert len(stored.text) <= 300 and stored.text.endswith("failed.")
    assert stored.summary_source == "sentence_cut"
    await store.close()
