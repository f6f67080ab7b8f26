"""The debate's long-term memory in the trading-memory graph (``LongTermMemory`` over ``memory/``).

Recall goes through ``memory.retrieval.Retriever``, so a debate role ranks memories with the same
FinMem score as every other reader, with the role's own weight on top:
``score = sim * kind_weight * role_weight - recency_lambda * age_days + salience_weight * salience``
(``sim``: cosine of the text embeddings). The candidates are every kind in the graph: the lessons
the memory writer drew from exits, its rollups, a person's insights and the debate's own entries.

Remember writes one ``Insight`` through ``MemoryStore.put_insight``: a role's output as kind
``debate`` (its text tagged ``[role]``, so any reader sees whose opinion it was), a reflection after
an exit as kind ``reflection`` (a lesson like the writer's, found by every decider). Texts are cut at
a sentence boundary to the store's 300 characters and pass the memory writer's own filters (length,
retried write, near-duplicate). With ``memory.write_back`` off there is no writer: nothing is written.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable

from agent.debate_memory import MemoryEntry, Recalled, RecallQuery, ScoreParts
from memory.config import InsightKind, RetrievalConfig
from memory.embeddings import TextEmbedder
from memory.insights import MAX_TEXT_CHARS, cut_at_sentence
from memory.model import Insight, ScoredInsight
from memory.port import MemoryStore
from memory.retrieval import Retriever

Accept = Callable[[Insight], Awaitable[bool]]

_ROLE_TAG = re.compile(r"^\[(bull|bear|trader|manager|reflection)\] ")


class GraphDebateMemory:
    """``LongTermMemory`` over the daemon's memory store (SQLite or Neo4j); survives a restart."""

    name = "graph"

    def __init__(
        self,
        store: MemoryStore,
        config: RetrievalConfig,
        embedder: TextEmbedder,
        accept: Accept | None,
    ) -> None:
        """``accept``: the memory writer's filters (``MemoryWriter.accept``); None: read only."""
        self._store = store
        self._config = config
        self._embedder = embedder
        self._accept = accept
        self._retrievers: dict[float, Retriever] = {}

    def _retriever(self, role_weight: float) -> Retriever:
        """One retriever per role weight: the kind weights scaled by it (built once)."""
        found = self._retrievers.get(role_weight)
        if found is None:
            weights = {k: w * role_weight for k, w in self._config.role_weights.items()}
            # a kind without a configured weight counts 1.0 in the retriever: scale that too
            for kind in ("reflection", "rollup", "person", "debate"):
                weights.setdefault(kind, role_weight)
            config = self._config.model_copy(update={"role_weights": weights})
            found = self._retrievers[role_weight] = Retriever(self._store, config, self._embedder)
        return found

    async def recall(self, query: RecallQuery) -> list[Recalled]:
        if query.k <= 0:
            return []
        found = await self._retriever(query.role_weight).retrieve(
            now_ms=query.now_ms, ticker=query.ticker, text=query.text, k=query.k
        )
        # a memory from after ``now`` is left out by the retriever, before the best k are kept
        return [_recalled(item) for item in found]

    async def remember(self, entry: MemoryEntry) -> bool:
        if self._accept is None:
            return False
        kind: InsightKind = "reflection" if entry.kind == "reflection" else "debate"
        tagged = entry.text if kind == "reflection" else f"[{entry.role}] {entry.text}"
        text = cut_at_sentence(tagged, MAX_TEXT_CHARS)
        (embedding,) = await self._embedder.embed([text])
        insight = Insight(
            # no time in the id: the same text of the same role and ticker is one memory
            insight_id=Insight.make_id(kind, 0, entry.ticker, text),
            text=text,
            kind=kind,
            salience=entry.salience,
            author="model",
            summary_source="model_summary" if text == tagged else "sentence_cut",
            created_ms=entry.created_ms,
            ticker=entry.ticker,
            embedding=embedding,
        )
        if not await self._accept(insight):
            return False
        return await self._store.put_insight(insight)


def _recalled(item: ScoredInsight) -> Recalled:
    insight, parts = item.insight, item.parts
    tag = _ROLE_TAG.match(insight.text)
    role = tag.group(1) if tag else ("reflection" if insight.kind == "reflection" else insight.kind)
    return Recalled(
        memory_id=insight.insight_id,
        text=insight.text,
        role=role,
        kind=insight.kind,
        ticker=insight.ticker,
        created_ms=insight.created_ms,
        parts=ScoreParts(
            sim=parts.sim,
            role_weight=parts.role_weight,  # the effective weight: kind weight x role weight
            age_days=parts.age_days,
            salience=parts.salience,
            score=parts.score,
        ),
    )
