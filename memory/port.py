"""MemoryStore: the one port every memory backend implements (SQLite default, Neo4j adapter).

Writes are idempotent on natural keys (a retried ``put_trade`` / ``put_insight`` changes nothing).
Candidates come back with the cosine similarity the backend computed (numpy over the SQLite rows,
the vector index in Neo4j); scoring, TTL and cutoffs are ``memory.retrieval``'s, the same for all.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any, NamedTuple, Protocol, TypedDict, Unpack

from pydantic import BaseModel, ConfigDict

from memory.config import InsightKind
from memory.model import Insight, NeighbourSummary, NeighbourTrade, RegimeStats, Trade


class StoreUnavailableError(Exception):
    """The backend cannot be reached or used now; callers report it and retry later."""


class CandidateQuery(NamedTuple):
    """Insights about ``ticker`` (or about no ticker), not archived by a rollup, created from
    ``min_created_ms`` to ``max_created_ms`` (None: no newest), most similar first: by
    ``vector`` (situation) when given, else by ``embedding`` (text); with neither, newest first
    and ``sim`` 0.

    A plain tuple, not a model: every decision builds six, and validating them cost more than
    the search; a ``vector`` tuple reaches the index as the very object (``query_unit`` knows it
    by identity)."""

    ticker: str | None = None
    regime: str | None = None  # when set: insights about this regime or about no regime
    kinds: tuple[InsightKind, ...] = ()  # empty: every kind
    vector: tuple[float, ...] | None = None
    embedding: tuple[float, ...] | None = None
    min_created_ms: int = 0
    #: the retriever's now: an insight from after it did not exist then (a replay over a later
    #: run's store), and dropped only after the query it filled the candidates, leaving none
    max_created_ms: int | None = None
    limit: int = 15
    #: sim given to an insight without a situation vector (a person's) in a situation query
    unsituated_sim: float = 0.5


class InsightWhere(TypedDict, total=False):
    """``list_insights`` keywords (every backend takes these; ``InsightFilter`` has the defaults)."""

    ticker: str | None
    regime: str | None
    kind: InsightKind | None
    include_archived: bool
    limit: int


class InsightFilter(BaseModel):
    """Which insights ``list_insights`` returns: ``None`` filters match everything; archived
    (rolled-up) ones only with ``include_archived``; at most ``limit``, newest first."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    ticker: str | None = None
    regime: str | None = None
    kind: InsightKind | None = None
    include_archived: bool = False
    limit: int = 50


class MemoryStore(Protocol):
    name: str

    async def put_trade(self, trade: Trade) -> bool:
        """Write a Trade, its Situation, Ticker and Regime; False if it was already there."""
        ...

    async def get_trade(self, trade_id: str) -> Trade | None: ...

    async def put_insight(self, insight: Insight) -> bool:
        """Write an Insight with its ABOUT / TAUGHT / SUMMARISES edges; a rollup archives the
        insights it summarises. False if it was already there."""
        ...

    async def get_insight(self, insight_id: str) -> Insight | None: ...

    async def forget(self, item_id: str) -> bool:
        """Delete one Insight or Trade (and its Situation) by id; False if there was none."""
        ...

    async def list_insights(self, **where: Unpack[InsightWhere]) -> list[Insight]:
        """``InsightFilter(**where)``: newest first."""
        ...

    async def candidates(self, query: CandidateQuery) -> list[tuple[Insight, float]]: ...

    async def regime_stats(self, *, ticker: str | None, regime: str | None) -> list[RegimeStats]:
        """Closed-trade statistics per regime (one row per regime; filtered when given)."""
        ...

    async def neighbour_trades(
        self, *, ticker: str, regime: str, vector: Sequence[float], n: int
    ) -> list[NeighbourTrade]:
        """The ``n`` trades of this ticker and regime whose entry situation is most similar."""
        ...

    async def neighbour_summary(
        self, *, ticker: str, regime: str, vector: Sequence[float], n: int
    ) -> NeighbourSummary:
        """``NeighbourSummary.of(await neighbour_trades(...))``, without the models."""
        ...

    async def counts(self) -> dict[str, int]:
        """Nodes per label (trades, insights, archived insights, situations, tickers, regimes)."""
        ...

    async def export(self) -> list[dict[str, Any]]:
        """Every Trade and Insight as ``{"type": "trade"|"insight", **fields}``, oldest first."""
        ...

    async def close(self) -> None: ...


def reading(source: object) -> AbstractContextManager[object]:
    """``source.reading()`` where it has one: the reads inside may look for another process's
    writes once, not once each (``SqliteMemoryStore``, and what reads through it); else nothing."""
    hold = getattr(source, "reading", None)
    return hold() if hold is not None else nullcontext()
