"""FinMem-style retrieval over any MemoryStore.

``score = sim * role_weight[kind] - recency_lambda * age_days + salience_weight * salience``,
``sim`` the cosine of the current situation vector to the insight's (or, for a text query, of the
text embeddings). The store returns ``k * 3`` candidates about this ticker (or about none),
created by now, most similar first; items past their TTL or under ``score_cutoff`` are dropped; the top ``k`` come back
with their score parts, so a reader sees why each was chosen.
"""

from __future__ import annotations

from typing import NamedTuple

from core.clock import DAY_MS
from core.rounding import scaled_round
from memory.config import InsightKind, RetrievalConfig
from memory.embeddings import TextEmbedder
from memory.model import Insight, ScoredInsight, ScoreParts
from memory.port import CandidateQuery, MemoryStore


class Ranked(NamedTuple):
    """A ``ScoredInsight`` as plain values: the parts are the ``ScoreParts`` fields, rounded as
    there. The decision path reads these (two models per hit cost more than the ranking)."""

    insight: Insight
    sim: float
    role_weight: float
    age_days: float
    salience: float
    score: float

    def parts(self) -> dict[str, float]:
        """``ScoreParts(...).model_dump(mode="json")`` of these values."""
        return {
            "sim": self.sim,
            "role_weight": self.role_weight,
            "age_days": self.age_days,
            "salience": self.salience,
            "score": self.score,
        }


#: a ranking's row: (-score, -created_ms, insight_id, position, insight, sim, role weight,
#: age in days), the score rounded as ``ScoreParts`` holds it, the other parts not yet rounded
Row = tuple[float, int, str, int, Insight, float, float, float]


def row_score(row: Row) -> float:
    """``Ranked.score`` of the row (the same float), without making the ``Ranked``."""
    return float(-row[0])


def row_ranked(row: Row) -> Ranked:
    neg_score, _, _, _, insight, sim, weight, age_days = row
    return Ranked(
        insight,
        float(scaled_round(sim, 4, 1e4)),
        float(weight),
        float(scaled_round(age_days, 2, 1e2)),
        float(insight.salience),
        float(-neg_score),
    )


class Retriever:
    def __init__(
        self, store: MemoryStore, config: RetrievalConfig, embedder: TextEmbedder | None = None
    ) -> None:
        self.store = store
        self.config = config
        self._embedder = embedder
        #: each candidate's values that stay while it is the same (frozen) object, by identity:
        #: the year's few insights come back decision after decision as the very same objects
        self._fixed: dict[int, _Fixed] = {}
        self._fixed_salience_weight: float | None = None  # what ``_fixed``'s terms were made with

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
        found = await self.ranked(
            now_ms=now_ms, ticker=ticker, regime=regime, vector=vector, text=text, kinds=kinds, k=k
        )
        return [
            ScoredInsight(insight=hit.insight, parts=ScoreParts(**hit.parts())) for hit in found
        ]

    async def ranked(
        self,
        *,
        now_ms: int,
        ticker: str | None,
        regime: str | None = None,
        vector: tuple[float, ...] | None = None,
        text: str | None = None,
        kinds: tuple[InsightKind, ...] = (),
        k: int | None = None,
    ) -> list[Ranked]:
        """``retrieve``'s hits, best first, as plain values."""
        found = await self.rows(
            now_ms=now_ms, ticker=ticker, regime=regime, vector=vector, text=text, kinds=kinds, k=k
        )
        return [row_ranked(row) for row in found]

    async def rows(
        self,
        *,
        now_ms: int,
        ticker: str | None,
        regime: str | None = None,
        vector: tuple[float, ...] | None = None,
        text: str | None = None,
        kinds: tuple[InsightKind, ...] = (),
        k: int | None = None,
    ) -> list[Row]:
        """``ranked``'s hits as rows (``row_ranked`` makes each hit, ``row_score`` reads its
        score): a reader that keeps few of them, or only their scores, rounds no other part."""
        cfg = self.config
        k = k or cfg.k
        embedding = None
        if vector is None and text and self._embedder is not None:
            (embedding,) = await self._embedder.embed([text])
        found = await self.store.candidates(
            CandidateQuery(
                ticker=ticker,
                regime=regime,
                kinds=kinds,
                vector=vector,
                embedding=embedding,
                min_created_ms=now_ms - int(cfg.ttl_days * DAY_MS),
                max_created_ms=now_ms,
                limit=k * 3,
            )
        )
        return self._scored(found, now_ms, k)

    def _scored(self, found: list[tuple[Insight, float]], now_ms: int, k: int) -> list[Row]:
        """The best ``k`` of the candidates, scored. The weights are read at every call (the
        config's ``role_weights`` is a dict: it may change); the rest of an insight's part comes
        from ``_fixed`` while the insight is the very object it was made from."""
        cfg = self.config
        recency, salience_weight = cfg.recency_lambda, cfg.salience_weight
        weights, cutoff = cfg.role_weights, cfg.score_cutoff
        fixed = self._fixed
        if salience_weight is not self._fixed_salience_weight or len(fixed) > _FIXED_SIZE:
            fixed.clear()
            self._fixed_salience_weight = salience_weight
        kept: list[Row] = []
        for insight, sim in found:
            entry = fixed.get(id(insight))
            if entry is None or entry[0] is not insight:
                entry = fixed[id(insight)] = _fixed(insight, salience_weight)
            _, insight_id, created_ms, ttl_days, kind, salience_term = entry
            if created_ms > now_ms:
                # not written yet at ``now`` (a replay over a later run's store, a person's
                # date a year ahead): it ranked first with age 0 until its time came
                continue
            age_days = (now_ms - created_ms) / DAY_MS
            if not age_days > 0.0:  # max(0.0, age_days), without the call
                age_days = 0.0
            if ttl_days is not None and age_days > ttl_days:
                continue
            weight = weights.get(kind, 1.0)
            # ``sim * weight - recency * age_days + salience_weight * insight.salience``, the
            # last product made once (the same float: the same operands)
            score = sim * weight - recency * age_days + salience_term
            if score < cutoff:
                continue
            # ranked by the score as ScoreParts holds it, rounded; the other parts are rounded
            # when a reader makes the hit (``row_ranked``); the position keeps the sort stable
            # and off the Insight (as a key on the first three)
            rounded = scaled_round(score, 4, 1e4)
            kept.append(
                (
                    -rounded,
                    -created_ms,
                    insight_id,
                    len(kept),
                    insight,
                    sim,
                    weight,
                    age_days,
                )
            )
        kept.sort()
        del kept[k:]
        return kept


#: an insight, its id, created_ms, ttl_days and kind, and ``salience_weight * salience``
_Fixed = tuple[Insight, str, int, float | None, str, float]
_FIXED_SIZE = 4096


def _fixed(insight: Insight, salience_weight: float) -> _Fixed:
    return (
        insight,
        insight.insight_id,
        insight.created_ms,
        insight.ttl_days,
        insight.kind,
        salience_weight * insight.salience,
    )
