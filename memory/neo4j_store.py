"""The Neo4j MemoryStore: the official async driver and Cypher, for people who want to explore the
graph in Neo4j Browser (docker-compose.yml runs vigil + neo4j:5).

Every write MERGEs on a natural key (trade_id, insight_id, Ticker.name, Regime.name), so a retried
write is the same write. A vector index on Insight.situation_vector is created where the server has
one (Neo4j >= 5.11) for people querying in the Browser; ``candidates`` itself filters in Cypher
(ticker, regime, kind, not archived, TTL) and ranks the cosine client-side, because
``db.index.vector.queryNodes`` ranks before filtering and would drop matching items.
The constructor does no I/O: the schema is created on first use. A connection failure raises
``StoreUnavailableError`` (the writer keeps the row in its outbox; the snapshot reports it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Unpack

import numpy as np
import orjson
from neo4j import AsyncDriver, AsyncGraphDatabase
from neo4j.exceptions import Neo4jError, ServiceUnavailable, SessionExpired

from memory.model import VECTOR_DIM, Insight, NeighbourSummary, NeighbourTrade, RegimeStats, Trade
from memory.port import (
    CandidateQuery,
    InsightFilter,
    InsightWhere,
    StoreUnavailableError,
)

_SCHEMA = (
    "CREATE CONSTRAINT trade_id IF NOT EXISTS FOR (t:Trade) REQUIRE t.trade_id IS UNIQUE",
    "CREATE CONSTRAINT insight_id IF NOT EXISTS FOR (i:Insight) REQUIRE i.insight_id IS UNIQUE",
    "CREATE CONSTRAINT ticker_name IF NOT EXISTS FOR (t:Ticker) REQUIRE t.name IS UNIQUE",
    "CREATE CONSTRAINT regime_name IF NOT EXISTS FOR (r:Regime) REQUIRE r.name IS UNIQUE",
)
_VECTOR_INDEX = (
    "CREATE VECTOR INDEX insight_situation IF NOT EXISTS FOR (i:Insight) ON i.situation_vector "
    "OPTIONS {indexConfig: {`vector.dimensions`: $dim, `vector.similarity_function`: 'cosine'}}"
)

_PUT_TRADE = """
MERGE (t:Trade {trade_id: $id})
ON CREATE SET t += $props, t.created_now = true
ON MATCH SET t.created_now = false
MERGE (k:Ticker {name: $ticker})
MERGE (r:Regime {name: $regime})
SET r.crypto = $regime, r.macro = $macro, r.combined = $combined
MERGE (t)-[:OF]->(k)
MERGE (t)-[:IN]->(r)
FOREACH (_ IN CASE WHEN $vector IS NULL THEN [] ELSE [1] END |
    MERGE (s:Situation {trade_id: $id})
    SET s.vector = $vector, s.features = $features
    MERGE (t)-[:AT]->(s))
RETURN t.created_now AS created
"""

_PUT_INSIGHT = """
MERGE (i:Insight {insight_id: $id})
ON CREATE SET i += $props, i.archived = false, i.created_now = true
ON MATCH SET i.created_now = false
FOREACH (name IN CASE WHEN $ticker IS NULL THEN [] ELSE [$ticker] END |
    MERGE (k:Ticker {name: name}) MERGE (i)-[:ABOUT]->(k))
FOREACH (name IN CASE WHEN $regime IS NULL THEN [] ELSE [$regime] END |
    MERGE (r:Regime {name: name}) MERGE (i)-[:ABOUT]->(r))
WITH i
OPTIONAL MATCH (t:Trade {trade_id: $trade_id})
FOREACH (_ IN CASE WHEN t IS NULL THEN [] ELSE [1] END | MERGE (t)-[:TAUGHT]->(i))
WITH i
UNWIND (CASE WHEN size($children) = 0 THEN [null] ELSE $children END) AS child_id
OPTIONAL MATCH (c:Insight {insight_id: child_id})
FOREACH (_ IN CASE WHEN c IS NULL THEN [] ELSE [1] END |
    MERGE (i)-[:SUMMARISES]->(c) SET c.archived = true)
RETURN DISTINCT i.created_now AS created
"""


class Neo4jMemoryStore:
    name = "neo4j"

    def __init__(
        self, uri: str, user: str, password: str | None, *, database: str | None = None
    ) -> None:
        # short timeouts and no long driver-side retries: the snapshot reads this store inline,
        # and a down server must cost a decision seconds, not the driver's default 30 s of retries
        # (the writer's outbox retries writes later)
        self._driver: AsyncDriver = AsyncGraphDatabase.driver(
            uri,
            auth=(user, password) if password is not None else None,
            connection_timeout=2.0,
            connection_acquisition_timeout=2.0,
            max_transaction_retry_time=1.0,
        )
        self._database = database
        self._ready = False
        self.vector_index = False

    async def _run(self, query: str, **params: Any) -> list[dict[str, Any]]:
        await self._ensure_schema()
        return await self._raw(query, **params)

    async def _raw(self, query: str, **params: Any) -> list[dict[str, Any]]:
        try:
            result = await self._driver.execute_query(query, params, database_=self._database)
        except (ServiceUnavailable, SessionExpired, OSError) as exc:
            raise StoreUnavailableError(f"neo4j unavailable: {exc}") from exc
        return [record.data() for record in result.records]

    async def _ensure_schema(self) -> None:
        if self._ready:
            return
        for statement in _SCHEMA:
            await self._raw(statement)
        try:
            await self._raw(_VECTOR_INDEX, dim=VECTOR_DIM)
            self.vector_index = True
        except Neo4jError:
            self.vector_index = False  # an older server: client-side cosine instead
        self._ready = True

    async def put_trade(self, trade: Trade) -> bool:
        situation = trade.situation
        rows = await self._run(
            _PUT_TRADE,
            id=trade.trade_id,
            props={
                "ticker": trade.ticker,
                "regime": trade.regime,
                "entry_ms": trade.entry_ms,
                "exit_ms": trade.exit_ms,
                "pnl_pct": trade.pnl_pct,
                "holding_secs": trade.holding_secs,
                "exit_reason": trade.exit_reason,
                "decided_by": trade.decided_by,
                "body": trade.model_dump_json(),
            },
            ticker=trade.ticker,
            regime=trade.regime,
            macro=trade.macro,
            combined=trade.combined_regime,
            vector=list(situation.vector) if situation else None,
            features=orjson.dumps(situation.features).decode() if situation else None,
        )
        return bool(rows and rows[0]["created"])

    async def get_trade(self, trade_id: str) -> Trade | None:
        rows = await self._run("MATCH (t:Trade {trade_id: $id}) RETURN t.body AS body", id=trade_id)
        return Trade.model_validate_json(rows[0]["body"]) if rows else None

    async def put_insight(self, insight: Insight) -> bool:
        props: dict[str, Any] = {
            "kind": insight.kind,
            "text": insight.text,
            "ticker": insight.ticker,
            "regime": insight.regime,
            "created_ms": insight.created_ms,
            "salience": insight.salience,
            "author": insight.author,
            "body": insight.model_dump_json(),
        }
        if insight.situation_vector is not None:
            props["situation_vector"] = list(insight.situation_vector)
        if insight.embedding is not None:
            props["embedding"] = list(insight.embedding)
        rows = await self._run(
            _PUT_INSIGHT,
            id=insight.insight_id,
            props={k: v for k, v in props.items() if v is not None},
            ticker=insight.ticker,
            regime=insight.regime,
            trade_id=insight.trade_id,
            children=list(insight.summarises),
        )
        return bool(rows and rows[0]["created"])

    async def get_insight(self, insight_id: str) -> Insight | None:
        rows = await self._run(
            "MATCH (i:Insight {insight_id: $id}) RETURN i.body AS body", id=insight_id
        )
        return Insight.model_validate_json(rows[0]["body"]) if rows else None

    async def forget(self, item_id: str) -> bool:
        rows = await self._run(
            "OPTIONAL MATCH (i:Insight {insight_id: $id}) "
            "OPTIONAL MATCH (t:Trade {trade_id: $id}) OPTIONAL MATCH (s:Situation {trade_id: $id}) "
            "WITH [x IN [i, t, s] WHERE x IS NOT NULL] AS found "
            "FOREACH (x IN found | DETACH DELETE x) RETURN size(found) AS n",
            id=item_id,
        )
        return bool(rows and rows[0]["n"])

    async def list_insights(self, **where: Unpack[InsightWhere]) -> list[Insight]:
        f = InsightFilter(**where)
        rows = await self._run(
            "MATCH (i:Insight) WHERE ($ticker IS NULL OR i.ticker = $ticker) "
            "AND ($regime IS NULL OR i.regime = $regime) AND ($kind IS NULL OR i.kind = $kind) "
            "AND ($archived OR NOT i.archived) "
            "RETURN i.body AS body ORDER BY i.created_ms DESC, i.insight_id LIMIT $limit",
            ticker=f.ticker,
            regime=f.regime,
            kind=f.kind,
            archived=f.include_archived,
            limit=f.limit,
        )
        return [Insight.model_validate_json(r["body"]) for r in rows]

    async def candidates(self, query: CandidateQuery) -> list[tuple[Insight, float]]:
        where = (
            "NOT i.archived AND i.created_ms >= $min_ms "
            "AND ($max_ms IS NULL OR i.created_ms <= $max_ms) "
            "AND ($ticker IS NULL OR i.ticker IS NULL OR i.ticker = $ticker) "
            "AND ($regime IS NULL OR i.regime IS NULL OR i.regime = $regime) "
            "AND (size($kinds) = 0 OR i.kind IN $kinds)"
        )
        params: dict[str, Any] = {
            "min_ms": query.min_created_ms,
            "max_ms": query.max_created_ms,
            "ticker": query.ticker,
            "regime": query.regime,
            "kinds": list(query.kinds),
        }
        probe = query.vector if query.vector is not None else query.embedding
        field = "situation_vector" if query.vector is not None else "embedding"
        if probe is None:
            rows = await self._run(
                f"MATCH (i:Insight) WHERE {where} RETURN i.body AS body "
                "ORDER BY i.created_ms DESC LIMIT $limit",
                limit=query.limit,
                **params,
            )
            return [(Insight.model_validate_json(r["body"]), 0.0) for r in rows]
        rows = await self._run(
            f"MATCH (i:Insight) WHERE {where} RETURN i.body AS body, i.{field} AS v",
            **params,
        )
        scored: list[tuple[Insight, float]] = []
        q = np.asarray(probe, dtype=np.float64)
        for row in rows:
            if row["v"] is None:
                if query.vector is None:
                    continue
                sim = query.unsituated_sim
            else:
                sim = _cosine(q, np.asarray(row["v"], dtype=np.float64))
            scored.append((Insight.model_validate_json(row["body"]), sim))
        scored.sort(key=lambda pair: (-pair[1], pair[0].created_ms, pair[0].insight_id))
        return scored[: query.limit]

    async def regime_stats(self, *, ticker: str | None, regime: str | None) -> list[RegimeStats]:
        rows = await self._run(
            "MATCH (t:Trade) WHERE ($ticker IS NULL OR t.ticker = $ticker) "
            "AND ($regime IS NULL OR t.regime = $regime) "
            "RETURN t.regime AS regime, count(t) AS n, "
            "sum(CASE WHEN t.pnl_pct > 0 THEN 1 ELSE 0 END) AS wins, "
            "avg(t.pnl_pct) AS pnl, avg(t.holding_secs) AS hold ORDER BY regime",
            ticker=ticker,
            regime=regime,
        )
        return [
            RegimeStats(
                ticker=ticker,
                regime=r["regime"],
                n=r["n"],
                wins=r["wins"],
                win_rate=r["wins"] / r["n"] if r["n"] else None,
                mean_pnl_pct=r["pnl"],
                mean_holding_secs=r["hold"],
            )
            for r in rows
        ]

    async def neighbour_trades(
        self, *, ticker: str, regime: str, vector: Sequence[float], n: int
    ) -> list[NeighbourTrade]:
        rows = await self._run(
            "MATCH (t:Trade {ticker: $ticker, regime: $regime})-[:AT]->(s:Situation) "
            "RETURN t.trade_id AS id, t.pnl_pct AS pnl, s.vector AS v",
            ticker=ticker,
            regime=regime,
        )
        q = np.asarray(vector, dtype=np.float64)
        found = [
            NeighbourTrade(
                trade_id=r["id"], pnl_pct=r["pnl"], sim=_cosine(q, np.asarray(r["v"], float))
            )
            for r in rows
        ]
        found.sort(key=lambda t: (-t.sim, t.trade_id))
        return found[:n]

    async def neighbour_summary(
        self, *, ticker: str, regime: str, vector: Sequence[float], n: int
    ) -> NeighbourSummary:
        found = await self.neighbour_trades(ticker=ticker, regime=regime, vector=vector, n=n)
        return NeighbourSummary.of(found)

    async def counts(self) -> dict[str, int]:
        rows = await self._run(
            "CALL { MATCH (t:Trade) RETURN count(t) AS trades } "
            "CALL { MATCH (s:Situation) RETURN count(s) AS situations } "
            "CALL { MATCH (i:Insight) WHERE NOT i.archived RETURN count(i) AS insights } "
            "CALL { MATCH (i:Insight) WHERE i.archived RETURN count(i) AS archived_insights } "
            "CALL { MATCH (k:Ticker) RETURN count(k) AS tickers } "
            "CALL { MATCH (r:Regime) RETURN count(r) AS regimes } "
            "RETURN trades, situations, insights, archived_insights, tickers, regimes"
        )
        return {k: int(v) for k, v in rows[0].items()}

    async def export(self) -> list[dict[str, Any]]:
        trades = await self._run(
            "MATCH (t:Trade) RETURN t.body AS body ORDER BY t.exit_ms, t.trade_id"
        )
        insights = await self._run(
            "MATCH (i:Insight) RETURN i.body AS body ORDER BY i.created_ms, i.insight_id"
        )
        return [{"type": "trade", **orjson.loads(r["body"])} for r in trades] + [
            {"type": "insight", **orjson.loads(r["body"])} for r in insights
        ]

    async def close(self) -> None:
        await self._driver.close()


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    if a.shape != b.shape:
        return 0.0
    norm = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(a @ b / norm) if norm > 0 else 0.0
