"""In-memory indexes of the SQLite store, so a retrieval is a few vectorised numpy operations.

``InsightIndex``: the situation unit vectors of the live (not archived) insights, row-aligned with
their ids and filter columns, loaded once from the indexed columns (never the JSON bodies) and
appended to on this process's writes. ``TradeGroup``: one (ticker, regime)'s running statistics
and entry-situation unit vectors. Cosine is a matrix-vector product over unit rows; no per-row
Python on the query path.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from memory.model import VECTOR_DIM
from memory.port import CandidateQuery


def top_positions(values: np.ndarray, n: int) -> np.ndarray:
    """Positions of the ``n`` largest values, largest first (ties: lower position first)."""
    if len(values) > n:
        part = np.argpartition(-values, n)[:n]
        return part[np.lexsort((part, -values[part]))]
    return np.lexsort((np.arange(len(values)), -values))


def unit(vector: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm > 0 else vector


def _codes(values: list[str | None], table: dict[str | None, int]) -> np.ndarray:
    return np.fromiter((table.setdefault(v, len(table)) for v in values), np.int32, len(values))


@dataclass
class InsightIndex:
    """Rows in load / write order; the numpy views are rebuilt lazily after appends."""

    ids: list[str] = field(default_factory=list)
    tickers: list[str | None] = field(default_factory=list)
    regimes: list[str | None] = field(default_factory=list)
    kinds: list[str | None] = field(default_factory=list)
    created: list[int] = field(default_factory=list)
    has_vector: list[bool] = field(default_factory=list)
    rows: list[np.ndarray] = field(default_factory=list)
    codes: dict[str | None, int] = field(default_factory=lambda: {None: 0})
    _arrays: dict[str, np.ndarray] | None = None

    def append_row(
        self,
        insight_id: str,
        ticker: str | None,
        regime: str | None,
        kind: str,
        created_ms: int,
        vector: np.ndarray | None,
    ) -> None:
        self.ids.append(insight_id)
        self.tickers.append(ticker)
        self.regimes.append(regime)
        self.kinds.append(kind)
        self.created.append(created_ms)
        vec = np.zeros(VECTOR_DIM, dtype=np.float32)
        if vector is not None and len(vector) == VECTOR_DIM:
            vec = vector
        self.has_vector.append(vector is not None)
        self.rows.append(unit(vec))
        self._arrays = None

    def arrays(self) -> dict[str, np.ndarray]:
        if self._arrays is None:
            self._arrays = {
                "matrix": np.vstack(self.rows) if self.rows else np.zeros((0, VECTOR_DIM)),
                "ticker": _codes(self.tickers, self.codes),
                "regime": _codes(self.regimes, self.codes),
                "kind": _codes(self.kinds, self.codes),
                "created": np.asarray(self.created, dtype=np.int64),
                "has_vector": np.asarray(self.has_vector, dtype=bool),
            }
        return self._arrays

    def mask(self, query: CandidateQuery) -> np.ndarray:
        a = self.arrays()
        code = self.codes.get
        mask = a["created"] >= query.min_created_ms
        if query.ticker is not None:
            mask &= (a["ticker"] == 0) | (a["ticker"] == code(query.ticker, -1))
        if query.regime is not None:
            mask &= (a["regime"] == 0) | (a["regime"] == code(query.regime, -1))
        if query.kinds:
            mask &= np.isin(a["kind"], [code(k, -1) for k in query.kinds])
        return mask

    def top(self, query: CandidateQuery) -> list[tuple[str, float]]:
        """The ids of the ``query.limit`` best rows that pass its filters, with their sim: by
        situation cosine when ``query.vector`` is given (``unsituated_sim`` for rows without a
        vector), else newest first with sim 0."""
        if not self.ids:
            return []
        arrays = self.arrays()
        rows = np.flatnonzero(self.mask(query))
        if query.vector is None:
            order = top_positions(arrays["created"][rows].astype(np.float64), query.limit)
            return [(self.ids[i], 0.0) for i in rows[order]]
        q = unit(np.asarray(query.vector, dtype=np.float32))
        sims = arrays["matrix"][rows] @ q
        sims = np.where(arrays["has_vector"][rows], sims, np.float32(query.unsituated_sim))
        return [(self.ids[rows[i]], float(sims[i])) for i in top_positions(sims, query.limit)]


@dataclass
class TradeGroup:
    """One (ticker, regime)'s trades: running statistics over all of them, and the entry-situation
    unit vectors of those that have one (neighbour queries)."""

    n: int = 0
    wins: int = 0
    sum_pnl: float = 0.0
    sum_holding: float = 0.0
    ids: list[str] = field(default_factory=list)
    pnl: list[float] = field(default_factory=list)
    rows: list[np.ndarray] = field(default_factory=list)
    _matrix: np.ndarray | None = None

    def add(self, trade_id: str, pnl_pct: float, holding: float, vector: np.ndarray | None) -> None:
        self.n += 1
        self.wins += pnl_pct > 0
        self.sum_pnl += pnl_pct
        self.sum_holding += holding
        if vector is not None:
            self.ids.append(trade_id)
            self.pnl.append(pnl_pct)
            self.rows.append(unit(vector))
            self._matrix = None

    def merge_counts(self, other: TradeGroup) -> None:
        self.n += other.n
        self.wins += other.wins
        self.sum_pnl += other.sum_pnl
        self.sum_holding += other.sum_holding

    def nearest(self, vector: np.ndarray, n: int) -> list[tuple[str, float, float]]:
        """(trade id, pnl %, cosine) of the ``n`` most similar entry situations."""
        if not self.rows:
            return []
        if self._matrix is None:
            self._matrix = np.vstack(self.rows)
        sims = self._matrix @ unit(vector)
        return [(self.ids[i], self.pnl[i], float(sims[i])) for i in top_positions(sims, n)]
