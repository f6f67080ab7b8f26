"""The embedded default MemoryStore: SQLite in the state dir (``memory.db``).

The file, its schema and migrations are ``memory.sqlite_schema``; the in-memory indexes that make
a retrieval a few numpy operations are ``memory.sqlite_index``. Calls are synchronous on the event
loop on purpose: a write is ~1 ms and a retrieval a few ms, and replay stays deterministic (a write
is visible to the next decision).

The insight index and the trade groups are loaded once and appended to on this process's writes;
another process's write (the ``vigil memory`` CLI) bumps ``PRAGMA data_version`` (this connection's
own commits never do) and they are reloaded. A look costs a read transaction's locks (3 us alone,
10-20 us inside a replay), so it is taken once per ``reading()`` (a snapshot's reads, the prompt's)
and, with a clock, once per clock instant: a write from another process is seen from the next
instant on (the next millisecond live; the next step of a replay). And only when the WAL-index
header (``memory.wal_index``) has changed since the look before: no commit, no new answer.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Unpack

import numpy as np

from core.clock import Clock
from memory.model import Insight, NeighbourSummary, NeighbourTrade, RegimeStats, Trade
from memory.port import (
    CandidateQuery,
    InsightFilter,
    InsightWhere,
    StoreUnavailableError,
)
from memory.sqlite_index import InsightIndex, TradeGroup, top_positions
from memory.sqlite_rows import (
    LeftOut,
    embedding_of,
    index_row,
    read_insight,
    read_trade,
    trade_stats_row,
)
from memory.sqlite_schema import (
    INSERT_INSIGHT,
    INSERT_TRADE,
    INSIGHT_COLUMNS,
    SCHEMA_VERSION,
    connect,
    insight_row,
    schema_version,
    trade_row,
)
from memory.wal_index import WalHeader

_PARSED_CACHE = 20_000  # parsed insights kept for retrieval (~2 KB each)
_STATS_CACHE = 256  # (ticker, regime) filters of regime_stats answered from memory


class SqliteMemoryStore:
    name = "sqlite"

    def __init__(self, path: Path, clock: Clock | None = None) -> None:
        self.path = path
        self._clock = clock
        self._left_out = LeftOut(path)
        self._looked_at_ms: int | None = None
        self._db = connect(path)
        self._index: InsightIndex | None = None
        self._parsed: dict[str, Insight] = {}
        self._trades: dict[tuple[str, str], TradeGroup] | None = None
        #: regime_stats answers while the trade groups stay as they are (emptied when they change)
        self._stats: dict[tuple[str | None, str | None], list[RegimeStats]] = {}
        self._wal = WalHeader(path, self._db)
        #: the WAL-index header read just before the last data_version look (None: cannot tell)
        self._header = self._wal.read()
        self._data_version = self._version()
        self._reading = 0  # > 0: inside ``reading()``, the caches stand as they are
        self._held = _Reading(self)

    def reading(self) -> AbstractContextManager[None]:
        """The reads inside see the store as it was at entry, with this process's own writes:
        another process's write is looked for once, here, and seen by the next call outside (a
        snapshot's memory view reads three tickers with three calls each)."""
        return self._held

    def schema_version(self) -> int:
        return schema_version(self._db)

    def _version(self) -> int:
        return int(self._rows("PRAGMA data_version")[0][0])

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """A read's rows. A file SQLite cannot read now (a page malformed, a table another
        program dropped, a lock held past busy_timeout) is the store unavailable, as a write's
        error is: its sqlite3 error went past every reader's catch (the snapshot's memory view,
        the write-back's flush), a traceback at each decision and each wake-up."""
        try:
            return self._db.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise StoreUnavailableError(f"{self.path}: {exc}") from exc

    def _refresh(self) -> None:
        """Drops both caches if another connection committed since the last look."""
        if self._reading:
            return
        if self._clock is not None:
            now = self._clock.now_ms()
            if now == self._looked_at_ms:
                return
            self._looked_at_ms = now
        header = self._wal.read()
        if header is not None and header == self._header:
            return  # nothing committed by anyone since the header was read before the last look
        version = self._version()
        self._header = header  # read before the look: a commit after it changes the header
        if version != self._data_version:
            self._index = self._trades = None
            self._data_version = version

    def _write(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> int:
        """One transaction; returns the rows the first statement changed."""
        try:
            self._db.execute("BEGIN IMMEDIATE")
            changed = -1
            for sql, params in statements:
                cursor = self._db.execute(sql, params)
                if changed < 0:
                    changed = cursor.rowcount
            self._db.execute("COMMIT")
            return changed
        except sqlite3.Error as exc:
            if self._db.in_transaction:
                with contextlib.suppress(sqlite3.Error):  # a file gone bad: nothing to undo
                    self._db.execute("ROLLBACK")
            raise StoreUnavailableError(f"{self.path}: {exc}") from exc

    # ---- trades

    async def put_trade(self, trade: Trade) -> bool:
        vector = trade.situation.vector if trade.situation else None
        changed = self._write(
            [
                (INSERT_TRADE, trade_row(trade)),
            ]
        )
        # before appending: the version must not move past another process's earlier write
        self._refresh()
        if changed > 0 and self._trades is not None:
            group = self._trades.setdefault((trade.ticker, trade.regime), TradeGroup())
            array = None if vector is None else np.asarray(vector, dtype=np.float32)
            group.add(trade.trade_id, trade.pnl_pct, trade.holding_secs, array)
            self._stats.clear()
        return changed > 0

    async def get_trade(self, trade_id: str) -> Trade | None:
        rows = self._rows("SELECT body FROM trades WHERE trade_id=?", (trade_id,))
        return read_trade(rows[0][0], trade_id, self._left_out) if rows else None

    # ---- insights

    async def put_insight(self, insight: Insight) -> bool:
        statements: list[tuple[str, Sequence[Any]]] = [
            (INSERT_INSIGHT, insight_row(insight)),
        ]
        for child in insight.summarises:
            statements.append(
                ("INSERT OR IGNORE INTO summarises VALUES (?,?)", (insight.insight_id, child))
            )
            statements.append(("UPDATE insights SET archived=1 WHERE insight_id=?", (child,)))
        changed = self._write(statements)
        self._refresh()  # as in put_trade
        if changed > 0:
            if insight.summarises:
                self._index = None  # children left the live set
            elif self._index is not None:
                vector = insight.situation_vector
                self._index.append_row(
                    insight.insight_id,
                    insight.ticker,
                    insight.regime,
                    insight.kind,
                    insight.created_ms,
                    None if vector is None else np.asarray(vector, dtype=np.float32),
                )
        return changed > 0

    def _parsed_insight(self, insight_id: str) -> Insight | None:
        """Insights never change once written (only archived, which leaves the index), so the
        parsed ones are kept while the index lives: a snapshot parses none twice."""
        cache = self._parsed
        if insight_id not in cache:
            if len(cache) >= _PARSED_CACHE:
                cache.clear()
            insight = self._read_insight(insight_id)
            if insight is None:
                return None
            cache[insight_id] = insight
        return cache[insight_id]

    async def get_insight(self, insight_id: str) -> Insight | None:
        return self._read_insight(insight_id)

    def _read_insight(self, insight_id: str) -> Insight | None:
        rows = self._rows(
            f"SELECT {INSIGHT_COLUMNS} FROM insights WHERE insight_id=?", (insight_id,)
        )
        return read_insight(rows[0], insight_id, self._left_out) if rows else None

    async def forget(self, item_id: str) -> bool:
        changed = self._write(
            [
                ("DELETE FROM insights WHERE insight_id=?", (item_id,)),
                ("DELETE FROM summarises WHERE parent=? OR child=?", (item_id, item_id)),
            ]
        )
        if changed <= 0:
            changed = self._write([("DELETE FROM trades WHERE trade_id=?", (item_id,))])
        self._index = self._trades = None
        self._parsed.clear()
        return changed > 0

    async def list_insights(self, **where: Unpack[InsightWhere]) -> list[Insight]:
        f = InsightFilter(**where)
        clauses: list[str] = ["1=1"]
        params: list[Any] = []
        for column, value in (("ticker", f.ticker), ("regime", f.regime), ("kind", f.kind)):
            if value is not None:
                clauses.append(f"{column}=?")
                params.append(value)
        if not f.include_archived:
            clauses.append("archived=0")
        sql = (
            f"SELECT {INSIGHT_COLUMNS}, insight_id FROM insights WHERE {' AND '.join(clauses)} "
            "ORDER BY created_ms DESC, insight_id LIMIT ? OFFSET ?"
        )
        # a row left out must not take a listed row's place: the newest insight of a kind (the
        # CLI's store clock) was none while an unreadable row was newer
        found: list[Insight] = []
        offset = 0
        while len(found) < f.limit:
            wanted = f.limit - len(found)
            rows = self._rows(sql, (*params, wanted, offset))
            found.extend(
                i for r in rows if (i := read_insight(r, r[3], self._left_out)) is not None
            )
            if len(rows) < wanted:
                break
            offset += len(rows)
        return found

    def _trade_groups(self) -> dict[tuple[str, str], TradeGroup]:
        self._refresh()
        if self._trades is None:
            groups: dict[tuple[str, str], TradeGroup] = {}
            for row in self._rows(
                "SELECT trade_id, ticker, regime, pnl_pct, holding_secs, vector FROM trades "
                "ORDER BY exit_ms, trade_id"
            ):
                read = trade_stats_row(row, self._left_out)
                if read is not None:
                    trade_id, ticker, regime, pnl, holding, array = read
                    group = groups.setdefault((ticker, regime), TradeGroup())
                    group.add(trade_id, pnl, holding, array)
            self._trades = groups
            self._stats.clear()
        return self._trades

    def _live_index(self) -> InsightIndex:
        self._refresh()
        if self._index is None:
            index = InsightIndex()
            self._parsed.clear()
            # the indexed columns only: parsing 100k JSON bodies would take seconds
            for row in self._rows(
                "SELECT insight_id, ticker, regime, kind, created_ms, vector FROM insights "
                "WHERE archived=0 ORDER BY created_ms, insight_id"
            ):
                read = index_row(row, self._left_out)
                if read is not None:
                    index.append_row(*read)
            self._index = index
        return self._index

    async def candidates(self, query: CandidateQuery) -> list[tuple[Insight, float]]:
        if query.vector is None and query.embedding is not None:
            return self._text_candidates(query)
        return self._index_candidates(query)

    def _index_candidates(self, query: CandidateQuery) -> list[tuple[Insight, float]]:
        out: list[tuple[Insight, float]] = []
        parsed = self._parsed
        for insight_id, sim in self._live_index().top(query):
            insight = parsed.get(insight_id)
            if insight is None:
                insight = self._parsed_insight(insight_id)
            if insight is not None:
                out.append((insight, sim))
        return out

    def _text_candidates(self, query: CandidateQuery) -> list[tuple[Insight, float]]:
        """Text queries (the CLI's search): cosine over the stored embeddings of the filtered rows."""
        assert query.embedding is not None
        where = ["archived=0", "embedding IS NOT NULL", "created_ms>=?"]
        params: list[Any] = [query.min_created_ms]
        if query.max_created_ms is not None:
            where.append("created_ms<=?")
            params.append(query.max_created_ms)
        if query.ticker is not None:
            where.append("(ticker=? OR ticker IS NULL)")
            params.append(query.ticker)
        if query.regime is not None:
            where.append("(regime=? OR regime IS NULL)")
            params.append(query.regime)
        rows = self._rows(
            f"SELECT {INSIGHT_COLUMNS}, kind, insight_id FROM insights WHERE {' AND '.join(where)}",
            params,
        )
        q = np.asarray(query.embedding, dtype=np.float32)
        rows = [r for r in rows if not query.kinds or r[3] in query.kinds]
        embedded = [
            (r, e) for r in rows if (e := embedding_of(r, len(q), self._left_out)) is not None
        ]
        if not embedded:
            return []
        matrix = np.vstack([e for _r, e in embedded])
        norms = np.linalg.norm(matrix, axis=1) * max(float(np.linalg.norm(q)), 1e-12)
        sims = (matrix @ q) / np.where(norms > 0, norms, 1.0)
        wanted = query.limit
        while True:  # more than ``limit`` only past rows that cannot be read (rare: one pass)
            out = []
            for i in top_positions(sims, wanted):
                row = embedded[i][0]
                insight = read_insight(row, row[4], self._left_out)
                if insight is not None:
                    out.append((insight, float(sims[i])))
            if len(out) >= query.limit or wanted >= len(embedded):
                return out[: query.limit]
            wanted *= 2

    # ---- statistics

    async def regime_stats(self, *, ticker: str | None, regime: str | None) -> list[RegimeStats]:
        """From the in-memory running sums (an SQL GROUP BY over 50k trades took ~40 ms), once
        per filter while no trade is added (each snapshot asks the same few)."""
        groups = self._trade_groups()
        found = self._stats.get((ticker, regime))
        if found is None:
            found = self._regime_stats(groups, ticker, regime)
            if len(self._stats) >= _STATS_CACHE:
                self._stats.clear()
            self._stats[(ticker, regime)] = found
        return list(found)

    @staticmethod
    def _regime_stats(
        groups: dict[tuple[str, str], TradeGroup], ticker: str | None, regime: str | None
    ) -> list[RegimeStats]:
        merged: dict[str, TradeGroup] = {}
        for (t, r), group in groups.items():
            if (ticker is not None and t != ticker) or (regime is not None and r != regime):
                continue
            merged.setdefault(r, TradeGroup()).merge_counts(group)
        return [
            RegimeStats(
                ticker=ticker,
                regime=r,
                n=g.n,
                wins=g.wins,
                win_rate=g.wins / g.n,
                mean_pnl_pct=g.sum_pnl / g.n,
                mean_holding_secs=g.sum_holding / g.n,
            )
            for r, g in sorted(merged.items())
            if g.n
        ]

    async def neighbour_trades(
        self, *, ticker: str, regime: str, vector: Sequence[float], n: int
    ) -> list[NeighbourTrade]:
        group = self._trade_groups().get((ticker, regime))
        if group is None:
            return []
        return [
            NeighbourTrade(trade_id=trade_id, pnl_pct=pnl, sim=sim)
            for trade_id, pnl, sim in group.nearest(vector, n)
        ]

    async def neighbour_summary(
        self, *, ticker: str, regime: str, vector: Sequence[float], n: int
    ) -> NeighbourSummary:
        group = self._trade_groups().get((ticker, regime))
        if group is None:
            return NeighbourSummary(0, 0, 0)
        # as NeighbourSummary.of the models: their floats are these floats, in this order
        return NeighbourSummary(*group.nearest_summary(vector, n))

    async def counts(self) -> dict[str, int]:
        def one(sql: str) -> int:
            return int(self._rows(sql)[0][0])

        return {
            "trades": one("SELECT COUNT(*) FROM trades"),
            "situations": one("SELECT COUNT(*) FROM trades WHERE vector IS NOT NULL"),
            "insights": one("SELECT COUNT(*) FROM insights WHERE archived=0"),
            "archived_insights": one("SELECT COUNT(*) FROM insights WHERE archived=1"),
            "tickers": one(
                "SELECT COUNT(*) FROM (SELECT ticker FROM trades UNION "
                "SELECT ticker FROM insights WHERE ticker IS NOT NULL)"
            ),
            "regimes": one(
                "SELECT COUNT(*) FROM (SELECT regime FROM trades UNION "
                "SELECT regime FROM insights WHERE regime IS NOT NULL)"
            ),
        }

    async def export(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for trade_id, body in self._rows(
            "SELECT trade_id, body FROM trades ORDER BY exit_ms, trade_id"
        ):
            trade = read_trade(body, trade_id, self._left_out)
            if trade is not None:
                out.append({"type": "trade", **trade.model_dump(mode="json")})
        for row in self._rows(
            f"SELECT {INSIGHT_COLUMNS}, insight_id FROM insights ORDER BY created_ms, insight_id"
        ):
            insight = read_insight(row, row[3], self._left_out)
            if insight is not None:
                out.append({"type": "insight", **insight.model_dump(mode="json")})
        return out

    async def close(self) -> None:
        self._wal.close()
        self._db.close()


class _Reading:
    """``SqliteMemoryStore.reading()``, one per store (the hold count is the store's: it nests)."""

    __slots__ = ("_store",)

    def __init__(self, store: SqliteMemoryStore) -> None:
        self._store = store

    def __enter__(self) -> None:
        self._store._refresh()
        self._store._reading += 1

    def __exit__(self, *_exc: object) -> None:
        self._store._reading -= 1


__all__ = ["SCHEMA_VERSION", "SqliteMemoryStore"]
