"""The trading memory as the context assembler's ``InsightSource``: the best lessons for a ticker.

Ranked by ``memory.retrieval.Retriever`` like every other reader: by the ticker's situation now
(``situation``: the vector the snapshot's memory view computed this decision) when there is one,
else by recency and salience. Only this ticker's (or no ticker's) insights of this regime (or of
none); the debate's opinions (kind ``debate``) stay out: the prompt's memory block is for lessons.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

from core.clock import Clock
from core.unvalidated import require_plain, unvalidated
from memory.config import InsightKind
from memory.context import InsightItem
from memory.model import Insight
from memory.port import reading
from memory.retrieval import Retriever, row_score

LESSON_KINDS: tuple[InsightKind, ...] = ("reflection", "rollup", "person")


class RetrieverInsights:
    def __init__(
        self,
        retriever: Retriever,
        clock: Clock,
        situation: Callable[[str], tuple[float, ...] | None] = lambda _ticker: None,
    ) -> None:
        self._retriever = retriever
        self._clock = clock
        self._situation = situation

    def reading(self) -> AbstractContextManager[object]:
        """The store's ``reading()``: the prompt's tickers read it with one look for another
        process's writes."""
        return reading(self._retriever.store)

    async def top_insights(self, ticker: str, regime: str | None, k: int) -> list[InsightItem]:
        if k <= 0:
            return []
        found = await self._retriever.rows(
            now_ms=self._clock.now_ms(),
            ticker=ticker,
            regime=regime,
            vector=self._situation(ticker),
            kinds=LESSON_KINDS,
            k=k,
        )
        # only the score of each hit: its other parts are not rounded for the prompt
        return [lesson_item(row[4], row_score(row)) for row in found]


def lesson_item(insight: Insight, score: float) -> InsightItem:
    """``InsightItem(text=..., score=score, ...)`` of the insight: made without validation when
    each value is of its field's type exactly (what a store's insight holds), as validation would
    make it (the same values, in the same order; ~1.1 us a lesson); validated otherwise."""
    text, ticker, insight_id, created_ms = (
        insight.text,
        insight.ticker,
        insight.insight_id,
        insight.created_ms,
    )
    fields = {
        "text": text,
        "score": score,
        "ticker": ticker,
        "insight_id": insight_id,
        "created_ms": created_ms,
    }
    if (
        type(text) is str
        and type(score) is float
        and (ticker is None or type(ticker) is str)
        and type(insight_id) is str
        and (created_ms is None or type(created_ms) is int)
    ):
        return unvalidated(InsightItem, fields)
    return InsightItem(**fields)


require_plain(InsightItem, frozenset({"text", "score", "ticker", "insight_id", "created_ms"}))
