"""FinMem-style retrieval over any MemoryStore.

``score = sim * role_weight[kind] - recency_lambda * age_days + salience_weight * salience``,
``sim`` the cosine of the current situation vector to the insight's (or, for a text query, of the
text embeddings). The store returns ``k * 3`` candidates about this ticker (or about none) most
similar first; items past their TTL or under ``score_cutoff`` are dropped; the top ``k`` come back
with their score parts, so a reader sees why each was chosen.
"""

from __future__ import annotations

from core.clock import DAY_MS
from memory.config import InsightKind, RetrievalConfig
from memory.embeddings import TextEmbedder
from memory.model import ScoredInsight, ScoreParts
from memory.port import CandidateQuery, MemoryStore


class Retriever:
    def __init__(
        self, store: MemoryStore, config: RetrievalConfig, embedder: TextEmbedder | None = None
    ) -> None:
        self.store = store
        self.config = config
        self._embedder = embedder

    async def retrieve(
        self,
        *,
        now_ms: int,
        ticker: str | None,
        regime: str | None = None,
        vector: tuple[float, ...] | None = None,
        text: str | None = None,
        kinds: tuple[InsightKind, ...] = (),
        k: int | None = None,
    ) -> list[ScoredInsight]:
        cfg = self.config
        k = k or cfg.k
        embedding = None
        if vector is None and text and self._embedder is not None:
            (embedding,) = await self._embedder.embed([text])
        query = CandidateQuery(
            ticker=ticker,
            regime=regime,
            kinds=kinds,
            vector=vector,
            embedding=embedding,
            min_created_ms=now_ms - int(cfg.ttl_days * DAY_MS),
            limit=k * 3,
        )
        scored: list[ScoredInsight] = []
        for insight, sim in await self.store.candidates(query):
            age_days = max(0.0, (now_ms - insight.created_ms) / DAY_MS)
            if insight.ttl_days is not None and age_days > insight.ttl_days:
                continue
            weight = cfg.role_weights.get(insight.kind, 1.0)
            score = (
                sim * weight
                - cfg.recency_lambda * age_days
                + cfg.salience_weight * insight.salience
            )
            if score < cfg.score_cutoff:
                continue
            parts = ScoreParts(
                sim=round(sim, 4),
                role_weight=weight,
                age_days=round(age_days, 2),
                salience=insight.salience,
                score=round(score, 4),
            )
            scored.append(ScoredInsight(insight=insight, parts=parts))
        scored.sort(key=lambda s: (-s.parts.score, -s.insight.created_ms, s.insight.insight_id))
        return scored[:k]
