"""An insight whose created_ms is after the decision's now (a person's edit a year ahead, a replay
over a later run's store) did not exist then: neither the snapshot's retriever nor the debate's
recall sees it. The snapshot's used to rank it first with age 0 for ever; the debate's recall
dropped it only after the top k, so it took the place of a memory the debate then went without."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agent.debate_memory import RecallQuery
from agent.debate_store import GraphDebateMemory
from contract.memory_contract import DAY_MS, make_insight
from memory.config import RetrievalConfig
from memory.embeddings import HashedNgramEmbedder
from memory.model import Situation
from memory.retrieval import Retriever, row_ranked
from memory.sqlite_store import SqliteMemoryStore

NOW = 1_750_000_000_000
HOT = Situation.from_features({"rsi_1h": 80.0}, "medium_volatility").vector
TEXT = "overbought RSI entries lost, keep the stop tight"


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteMemoryStore]:
    store = SqliteMemoryStore(tmp_path / "memory.db")
    embedder = HashedNgramEmbedder()
    (embedding,) = await embedder.embed([TEXT])
    for created_ms in (NOW + 365 * DAY_MS, NOW - 2 * DAY_MS):  # a year ahead; two days old
        item = make_insight(TEXT, kind="person", vector=HOT, created_ms=created_ms)
        await store.put_insight(item.model_copy(update={"embedding": embedding}))
    yield store
    await store.close()


@pytest.mark.parametrize("later", [1, 365 * DAY_MS])
async def test_the_snapshots_retriever_leaves_out_an_insight_from_after_now(
    store: SqliteMemoryStore, later: int
) -> None:
    config = RetrievalConfig(recency_lambda=0.0, score_cutoff=-1.0, ttl_days=1000)
    rows = await Retriever(store, config).rows(
        now_ms=NOW + 365 * DAY_MS - later, ticker="SOL/USDT", vector=HOT
    )
    assert [row_ranked(r).insight.created_ms for r in rows] == [NOW - 2 * DAY_MS]


async def test_the_debates_recall_gets_its_k_memories_of_before_now(
    store: SqliteMemoryStore,
) -> None:
    memory = GraphDebateMemory(
        store, RetrievalConfig(score_cutoff=-1.0), HashedNgramEmbedder(), accept=None
    )
    query = RecallQuery(role="bull", role_weight=1.0, text=TEXT, ticker="SOL/USDT", now_ms=NOW, k=1)
    (recalled,) = await memory.recall(query)
    assert recalled.created_ms == NOW - 2 * DAY_MS


async def test_an_insight_dated_past_2100_is_a_row_that_cannot_be(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = SqliteMemoryStore(tmp_path / "memory.db")
    for created_ms in (NOW * 1000, NOW):  # microseconds written for milliseconds; a good one
        await store.put_insight(
            make_insight(TEXT, kind="person", vector=HOT, created_ms=created_ms)
        )
    retriever = Retriever(store, RetrievalConfig(score_cutoff=-1.0))
    for _ in range(2):
        rows = await retriever.rows(now_ms=NOW, ticker="SOL/USDT", vector=HOT)
        assert [row_ranked(r).insight.created_ms for r in rows] == [NOW]
    await store.close()
    warned = [r.getMessage() for r in caplog.records if "cannot be read" in r.getMessage()]
    assert len(warned) == 1 and f"created_ms {NOW * 1000} is past 2010 .. 2100" in warned[0]


COLD = Situation.from_features({"rsi_1h": 20.0}, "medium_volatility").vector


@pytest.mark.parametrize("query", ["situation", "text", "newest"])
async def test_insights_from_after_now_leave_the_k_from_before_it(
    tmp_path: Path, query: str
) -> None:
    """A replay over a later run's store: its k * 3 candidates were all from after the replayed
    time (most similar, or newest), dropped after the query, so the decision got none."""
    store = SqliteMemoryStore(tmp_path / "memory.db")
    embedder = HashedNgramEmbedder()
    (later_text,) = await embedder.embed([TEXT])
    (earlier_text,) = await embedder.embed(["funding flipped negative before the drop"])
    for n in range(40):  # after now, and each more similar to the query than the earlier ones
        item = make_insight(f"{TEXT} {n}", vector=HOT, created_ms=NOW + (n + 1) * DAY_MS)
        await store.put_insight(item.model_copy(update={"embedding": later_text}))
    earlier = set()
    for n in range(3):
        item = make_insight(f"earlier {n}", vector=COLD, created_ms=NOW - (n + 1) * DAY_MS)
        await store.put_insight(item.model_copy(update={"embedding": earlier_text}))
        earlier.add(item.insight_id)
    config = RetrievalConfig(recency_lambda=0.0, score_cutoff=-1.0, k=3)
    retriever = Retriever(store, config, embedder)
    rows = await retriever.rows(
        now_ms=NOW,
        ticker="SOL/USDT",
        vector=HOT if query == "situation" else None,
        text=TEXT if query == "text" else None,
    )
    await store.close()
    assert {row_ranked(r).insight.insight_id for r in rows} == earlier
