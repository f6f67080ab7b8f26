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


@dataclass
class _Block:
    """The rows of one ticker (or of no ticker), row-aligned; numpy views rebuilt after appends."""

    ids: list[str] = field(default_factory=list)
    regimes: list[int] = field(default_factory=list)
    kinds: list[int] = field(default_factory=list)
    created: list[int] = field(default_factory=list)
    has_vector: list[bool] = field(default_factory=list)
    rows: list[np.ndarray] = field(default_factory=list)
    _arrays: dict[str, np.ndarray] | None = None

    def arrays(self) -> dict[str, np.ndarray]:
        if self._arrays is None:
            self._arrays = {
                "matrix": np.vstack(self.rows),
                "regime": np.asarray(self.regimes, dtype=np.int32),
                "kind": np.asarray(self.kinds, dtype=np.int32),
                "created": np.asarray(self.created, dtype=np.int64),
                "has_vector": np.asarray(self.has_vector, dtype=bool),
            }
        return self._arrays

    def best(
        self, query: CandidateQuery, codes: dict[str | None, int], q: np.ndarray | None
    ) -> list[tuple[float, int, str]]:
        """(key, created_ms, id) of this block's rows that pass the filters and may be among the
        best ``query.limit``: key = sim (situation query) or created_ms (newest first). Rows tied
        with the last place are all kept, so the caller's exact order decides between them."""
        a = self.arrays()
        mask = a["created"] >= query.min_created_ms
        if query.regime is not None:
            mask &= (a["regime"] == 0) | (a["regime"] == codes.get(query.regime, -1))
        if query.kinds:
            mask &= np.isin(a["kind"], [codes.get(k, -1) for k in query.kinds])
        rows = np.flatnonzero(mask)
        if q is None:
            keys = a["created"][rows].astype(np.float64)
        else:
            # gather the rows when few pass, else one product over the block
            sims = a["matrix"][rows] @ q if len(rows) < len(mask) // 2 else (a["matrix"] @ q)[rows]
            keys = np.where(a["has_vector"][rows], sims, np.float32(query.unsituated_sim))
        if len(keys) > query.limit:
            last_place = np.partition(keys, len(keys) - query.limit)[len(keys) - query.limit]
            chosen = np.flatnonzero(keys >= last_place)
        else:
            chosen = np.arange(len(keys))
        created = a["created"]
        return [(float(keys[i]), int(created[rows[i]]), self.ids[rows[i]]) for i in chosen.tolist()]


@dataclass
class InsightIndex:
    """The live insights, partitioned by ticker (a query reads its ticker's block and the block
    of insights about no ticker, never the others); filter values are integer codes."""

    blocks: dict[str | None, _Block] = field(default_factory=dict)
    codes: dict[str | None, int] = field(default_factory=lambda: {None: 0})

    def _code(self, value: str | None) -> int:
        return self.codes.setdefault(value, len(self.codes))

    def append_row(
        self,
        insight_id: str,
        ticker: str | None,
        regime: str | None,
        kind: str,
        created_ms: int,
        vector: np.ndarray | None,
    ) -> None:
        block = self.blocks.setdefault(ticker, _Block())
        block.ids.append(insight_id)
        block.regimes.append(self._code(regime))
        block.kinds.append(self._code(kind))
        block.created.append(created_ms)
        vec = np.zeros(VECTOR_DIM, dtype=np.float32)
        if vector is not None and len(vector) == VECTOR_DIM:
            vec = vector
        block.has_vector.append(vector is not None)
        block.rows.append(unit(vec))
        block._arrays = None

    def top(self, query: CandidateQuery) -> list[tuple[str, float]]:
        """The ids of the ``query.limit`` best rows that pass its filters, with their sim: by
        situation cosine when ``query.vector`` is given (``unsituated_sim`` for rows without a
        vector), else newest first with sim 0. Ties: the older, then the lower id, first (as in
        Neo4j), whatever the order the rows were loaded or written in."""
        names = list(self.blocks) if query.ticker is None else [query.ticker, None]
        q = None if query.vector is None else unit(np.asarray(query.vector, dtype=np.float32))
        found = [
            row
            for name in names
            if name in self.blocks
            for row in self.blocks[name].best(query, self.codes, q)
        ]
        found.sort(key=lambda row: (-row[0], row[1], row[2]))
        return [
            (insight_id, 0.0 if q is None else key) for key, _, insight_id in found[: query.limit]
        ]


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
