"""Retrieval scoring (FinMem) and the local text embedding."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from contract.memory_contract import DAY_MS, make_insight
from memory.config import RetrievalConfig
from memory.embeddings import HashedNgramEmbedder, cosine
from memory.model import Situation
from memory.retrieval import Retriever
from memory.sqlite_store import SqliteMemoryStore

NOW = 1_750_000_000_000
HOT = Situation.from_features({"rsi_1h": 80.0}, "medium_volatility").vector
COLD = Situation.from_features({"rsi_1h": 20.0}, "low_volatility").vector


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteMemoryStore]:
    store = SqliteMemoryStore(tmp_path / "memory.db")
    yield store
    await store.close()


async def test_score_parts_follow_the_formula(store: SqliteMemoryStore) -> None:
    config = RetrievalConfig(recency_lambda=0.01, salience_weight=0.3, score_cutoff=-1.0)
    item = make_insight("overbought entries lost", vector=HOT, created_ms=NOW - 10 * DAY_MS)
    await store.put_insight(item)
    (hit,) = await Retriever(store, config).retrieve(now_ms=NOW, ticker="SOL/USDT", vector=HOT)
    parts = hit.parts
    assert parts.sim == pytest.approx(1.0, abs=1e-4)
    assert parts.age_days == pytest.approx(10.0)
    assert parts.score == pytest.approx(1.0 * 1.0 - 0.01 * 10 + 0.3 * 0.5, abs=1e-3)


async def test_ttl_cutoff_and_k(store: SqliteMemoryStore) -> None:
    config = RetrievalConfig(ttl_days=30, score_cutoff=0.5, k=2)
    await store.put_insight(
        make_insight("too old to count", vector=HOT, created_ms=NOW - 40 * DAY_MS)
    )
    await store.put_insight(make_insight("dissimilar situation", vector=COLD, created_ms=NOW))
    for n in range(3):
        await store.put_insight(make_insight(f"similar lesson {n}", vector=HOT, created_ms=NOW - n))
    hits = await Retriever(store, config).retrieve(now_ms=NOW, ticker="SOL/USDT", vector=HOT)
    assert [h.insight.text for h in hits] == ["similar lesson 0", "similar lesson 1"]


async def test_own_ttl_and_role_weight(store: SqliteMemoryStore) -> None:
    config = RetrievalConfig(score_cutoff=-1.0)
    short = make_insight("short lived lesson", vector=HOT, created_ms=NOW - 3 * DAY_MS)
    short = short.model_copy(update={"ttl_days": 2.0})
    person = make_insight("a person's rule, no situation", kind="person", created_ms=NOW)
    await store.put_insight(short)
    await store.put_insight(person)
    hits = await Retriever(store, config).retrieve(now_ms=NOW, ticker="SOL/USDT", vector=HOT)
    assert [h.insight.kind for h in hits] == ["person"]
    assert hits[0].parts.role_weight == 1.5
    assert hits[0].parts.sim == 0.5  # a situation-less insight: the documented neutral sim


async def test_text_query_uses_embeddings(store: SqliteMemoryStore) -> None:
    embedder = HashedNgramEmbedder()
    texts = ["stop loss after an overbought RSI entry", "trailing stop locked a big momentum win"]
    for text, emb in zip(texts, await embedder.embed(texts), strict=True):
        item = make_insight(text, created_ms=NOW).model_copy(update={"embedding": emb})
        await store.put_insight(item)
    retriever = Retriever(store, RetrievalConfig(score_cutoff=-1.0), embedder)
    hits = await retriever.retrieve(now_ms=NOW, ticker="SOL/USDT", text="overbought RSI stop loss")
    assert hits[0].insight.text == texts[0]
    assert hits[0].parts.sim > hits[1].parts.sim


def test_local_embedding_is_deterministic_and_separates() -> None:
    embedder = HashedNgramEmbedder()
    a, b, c = embedder.embed_now(
        ["[SOL] RSI 71 entry, stop loss", "[SOL] RSI 72 entry, stop loss", "ETH trailing win"]
    )
    assert a == HashedNgramEmbedder().embed_now(["[SOL] RSI 71 entry, stop loss"])[0]
    assert len(a) == 256
    assert cosine(a, b) > 0.9 > cosine(a, c)
