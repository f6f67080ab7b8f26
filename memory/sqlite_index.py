"""In-memory indexes of the SQLite store, so a retrieval is a few vectorised numpy operations.

``InsightIndex``: the situation unit vectors of the live (not archived) insights, row-aligned with
their ids and filter columns, loaded once from the indexed columns (never the JSON bodies) and
appended to on this process's writes. ``TradeGroup``: one (ticker, regime)'s running statistics
and entry-situation unit vectors. Cosine is a matrix-vector product over unit rows; no per-row
Python on the query path.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import NamedTuple

import numpy as np

from memory.model import VECTOR_DIM
from memory.port import CandidateQuery

#: blocks up to this many rows are searched in Python lists around one numpy product
SMALL_BLOCK = 128


def top_positions(values: np.ndarray, n: int) -> np.ndarray:
    """Positions of the ``n`` largest values, largest first (ties: lower position first)."""
    if len(values) > n:
        part = np.argpartition(-values, n)[:n]
        return part[np.lexsort((part, -values[part]))]
    return np.lexsort((np.arange(len(values)), -values))


def unit(vector: np.ndarray) -> np.ndarray:
    if vector.dtype == np.float32:
        # np.linalg.norm's own steps for a float vector (ravel, dot, sqrt) without its checks
        flat = vector.ravel(order="K")
        norm = float(np.sqrt(flat.dot(flat)))
    else:
        norm = float(np.linalg.norm(vector))
    return vector / norm if norm > 0 else vector


_QUERY_UNITS: dict[bytes, np.ndarray] = {}
_QUERY_UNITS_SIZE = 64
#: the tuples asked with lately, by identity, with their unit vectors: a decision's three reads
#: of a ticker pass the very same tuple, and a lookup by ``id`` is cheaper than the bytes key. A
#: tuple of floats cannot change, and each entry holds its tuple, so no other takes its ``id``
_BY_IDENTITY: dict[int, tuple[tuple[float, ...], np.ndarray]] = {}
_BY_IDENTITY_SIZE = 16


def query_unit(vector: Sequence[float]) -> np.ndarray:
    """``unit`` of a query vector at float32, remembered: a decision asks with each ticker's
    situation three times (neighbour trades, the snapshot's insights, the prompt's). Keyed by the
    float32 bytes ``unit`` is computed from, so equal keys are the same computation (0.0 and -0.0
    differ), and a tuple asked with again is known by identity. The arrays handed out are
    read-only: they are shared."""
    seen = _BY_IDENTITY.get(id(vector))
    if seen is not None and seen[0] is vector:
        return seen[1]
    found = _query_unit(vector)
    if type(vector) is tuple:
        if len(_BY_IDENTITY) >= _BY_IDENTITY_SIZE:
            _BY_IDENTITY.clear()
        _BY_IDENTITY[id(vector)] = (vector, found)
    return found


def _query_unit(vector: Sequence[float]) -> np.ndarray:
    array = np.asarray(vector, dtype=np.float32)
    key = array.tobytes()
    found = _QUERY_UNITS.get(key)
    if found is None:
        found = unit(array)
        found.flags.writeable = False
        if len(_QUERY_UNITS) >= _QUERY_UNITS_SIZE:
            _QUERY_UNITS.clear()
        _QUERY_UNITS[key] = found
    return found


class _Filter(NamedTuple):
    mask: np.ndarray | None
    #: the positions the mask keeps and their created_ms (a bisect finds those past the TTL when
    #: the rows are in created order); for the Python path only, so empty in a large block
    positions: list[int]
    created: list[int]
    #: the block's matrix gathered at ``positions[start:end]``, by (start, end) (the rows within
    #: the TTL and by now move only when the clock passes a row's created_ms: the same gather
    #: decision after decision)
    gathered: dict[tuple[int, int], np.ndarray]


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
    #: (regime, kinds) of a query -> that filter's mask (None: no filter), the positions it
    #: keeps and their created_ms; emptied with ``_arrays``. Keyed by the names, not their codes:
    #: a name without a code yet matches none of these rows, and rows change only by an append,
    #: which empties it
    _filters: dict[tuple[str | None, tuple[str, ...]], _Filter] = field(default_factory=dict)
    _all_vectors: bool = False
    _created_sorted: bool = False  # rows in created_ms order (loaded so, and written so as a rule)

    def arrays(self) -> dict[str, np.ndarray]:
        if self._arrays is None:
            self._arrays = {
                "matrix": np.vstack(self.rows),
                "regime": np.asarray(self.regimes, dtype=np.int32),
                "kind": np.asarray(self.kinds, dtype=np.int32),
                "created": np.asarray(self.created, dtype=np.int64),
                "has_vector": np.asarray(self.has_vector, dtype=bool),
            }
            self._filters = {}
            self._all_vectors = all(self.has_vector)
            self._created_sorted = all(a <= b for a, b in pairwise(self.created))
        return self._arrays

    def _filter(self, query: CandidateQuery, codes: dict[str | None, int]) -> _Filter:
        """The regime and kinds part of the mask (None: no such filter) and the positions it
        keeps, computed once per filter while the rows stay: a decision asks the same few."""
        key = (query.regime, query.kinds)
        found = self._filters.get(key)
        if found is None:
            regime = None if query.regime is None else codes.get(query.regime, -1)
            kinds = [codes.get(k, -1) for k in query.kinds]
            a = self.arrays()
            mask = None
            if regime is not None:
                mask = (a["regime"] == 0) | (a["regime"] == regime)
            if kinds:
                kind_mask = a["kind"] == kinds[0]
                for code in kinds[1:]:
                    kind_mask |= a["kind"] == code
                mask = kind_mask if mask is None else mask & kind_mask
            positions: list[int] = []
            if len(self.ids) <= SMALL_BLOCK:
                positions = (
                    list(range(len(self.ids))) if mask is None else np.flatnonzero(mask).tolist()
                )
            stamps = [self.created[i] for i in positions]
            found = self._filters[key] = _Filter(mask, positions, stamps, {})
        return found

    def best(
        self, query: CandidateQuery, codes: dict[str | None, int], q: np.ndarray | None
    ) -> list[tuple[float, int, str]]:
        """(-key, created_ms, id) of this block's rows that pass the filters, enough of them for
        the best ``query.limit``: key = sim (situation query) or created_ms (newest first),
        negated so that the rows sort best first as they are. Rows tied with the last place are
        all kept, so the caller's exact order decides between them."""
        self.arrays()
        if len(self.ids) <= SMALL_BLOCK:
            found = self._best_small(query, codes, q)
            if found is not None:
                return found
        return self._best_numpy(query, codes, q)

    def _best_small(
        self, query: CandidateQuery, codes: dict[str | None, int], q: np.ndarray | None
    ) -> list[tuple[float, int, str]] | None:
        """``_best_numpy`` in Python lists around the one product: on a few dozen rows each numpy
        call costs more than the whole row loop. The same product of the same rows, so the same
        float32 sims; the passing rows tied with the ``limit``-th or better are returned (the
        caller's sort and cut pick the same best ``limit``). None when a key is not finite:
        ``_best_numpy`` handles NaN its own way."""
        created, ids = self.created, self.ids
        oldest, newest = query.min_created_ms, query.max_created_ms
        fixed = self._filter(query, codes)
        start = end = -1  # rows not a slice of the positions: nothing remembered
        if self._created_sorted:
            start = bisect_left(fixed.created, oldest)
            end = len(fixed.created) if newest is None else bisect_right(fixed.created, newest)
            rows = fixed.positions[start:end]
        else:
            rows = [
                i
                for i in fixed.positions
                if created[i] >= oldest and (newest is None or created[i] <= newest)
            ]
        if not rows:
            return []
        if q is None:
            return [(-float(created[i]), created[i], ids[i]) for i in rows]
        matrix = self.arrays()["matrix"]
        if len(rows) < len(ids) // 2:  # the rule ``_best_numpy`` gathers by
            sims = (self._gathered(fixed, start, end, rows) @ q).tolist()
        else:
            every = (matrix @ q).tolist()
            # no regime or kind filter: the rows are every position from the TTL cut to now
            sims = (
                every[start:end] if start >= 0 and fixed.mask is None else [every[i] for i in rows]
            )
        if not self._all_vectors:
            unsituated, has = float(np.float32(query.unsituated_sim)), self.has_vector
            sims = [sim if has[i] else unsituated for sim, i in zip(sims, rows, strict=True)]
        if not math.isfinite(sum(sims)):
            return None
        limit = query.limit
        if 0 < limit < len(sims):
            # the rows tied with the last place or better, as ``_best_numpy`` keeps: the caller's
            # sort and cut pick the same best ``limit``
            last_place = sorted(sims, reverse=True)[limit - 1]
            return [
                (-sim, created[i], ids[i])
                for sim, i in zip(sims, rows, strict=True)
                if sim >= last_place
            ]
        return [(-sim, created[i], ids[i]) for sim, i in zip(sims, rows, strict=True)]

    def _gathered(self, fixed: _Filter, start: int, end: int, rows: list[int]) -> np.ndarray:
        """``matrix[rows]``, remembered when ``rows`` is ``fixed.positions[start:end]``: the same
        rows in the same order, so the product over it is the same, bit for bit."""
        if start < 0:
            return self.arrays()["matrix"][rows]
        found = fixed.gathered.get((start, end))
        if found is None:
            found = fixed.gathered[(start, end)] = self.arrays()["matrix"][rows]
            found.flags.writeable = False
        return found

    def _best_numpy(
        self, query: CandidateQuery, codes: dict[str | None, int], q: np.ndarray | None
    ) -> list[tuple[float, int, str]]:
        """``best`` over many rows: vectorised, and only the rows that may make the best
        ``limit``."""
        a = self.arrays()
        mask = a["created"] >= query.min_created_ms
        if query.max_created_ms is not None:
            mask &= a["created"] <= query.max_created_ms
        fixed = self._filter(query, codes).mask
        if fixed is not None:
            mask &= fixed
        rows = np.flatnonzero(mask)
        if q is None:
            keys = a["created"][rows].astype(np.float64)
        else:
            # gather the rows when few pass, else one product over the block
            sims = a["matrix"][rows] @ q if len(rows) < len(mask) // 2 else (a["matrix"] @ q)[rows]
            keys = (
                sims
                if self._all_vectors
                else np.where(a["has_vector"][rows], sims, np.float32(query.unsituated_sim))
            )
        if len(keys) > query.limit:
            last_place = np.partition(keys, len(keys) - query.limit)[len(keys) - query.limit]
            chosen = np.flatnonzero(keys >= last_place)
            keys, rows = keys[chosen], rows[chosen]
        # Python lists from here: a numpy scalar per row costs more than the rest together
        created, ids = self.created, self.ids
        return [
            (-key, created[row], ids[row])
            for key, row in zip(keys.tolist(), rows.tolist(), strict=True)
        ]


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
        blocks, codes = self.blocks, self.codes
        q = None if query.vector is None else query_unit(query.vector)
        found: list[tuple[float, int, str]] = []
        if query.ticker is None:
            for block in blocks.values():
                found += block.best(query, codes, q)
        else:
            # a ticker's query reads its block and the one of insights about no ticker
            for name in (query.ticker, None):
                named = blocks.get(name)
                if named is not None:
                    found += named.best(query, codes, q)
        found.sort()
        return [
            (insight_id, 0.0 if q is None else -neg_key)
            for neg_key, _, insight_id in found[: query.limit]
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
    _row_wins: int = 0  # wins (pnl > 0) among the trades with a vector, the ``rows``

    def add(self, trade_id: str, pnl_pct: float, holding: float, vector: np.ndarray | None) -> None:
        self.n += 1
        self.wins += pnl_pct > 0
        self.sum_pnl += pnl_pct
        self.sum_holding += holding
        if vector is not None:
            self.ids.append(trade_id)
            self.pnl.append(pnl_pct)
            self.rows.append(unit(vector))
            self._row_wins += pnl_pct > 0
            self._matrix = None

    def merge_counts(self, other: TradeGroup) -> None:
        self.n += other.n
        self.wins += other.wins
        self.sum_pnl += other.sum_pnl
        self.sum_holding += other.sum_holding

    def nearest(self, vector: Sequence[float], n: int) -> list[tuple[str, float, float]]:
        """(trade id, pnl %, cosine) of the ``n`` most similar entry situations."""
        values, order = self._nearest(vector, n)
        ids, pnl = self.ids, self.pnl
        return [(ids[i], pnl[i], values[i]) for i in order]

    def nearest_summary(self, vector: Sequence[float], n: int) -> tuple[int, int, float]:
        """``nearest``'s count, wins (pnl > 0) and cosines summed in its order, without its
        triples (the snapshot's posterior reads these only)."""
        rows = len(self.rows)
        if 0 < rows <= n:
            # every row is a neighbour: the wins are all the rows' wins, and the cosines taken
            # best first are the values sorted best first (a stable sort, as ``_top_small``'s:
            # equal values, 0.0 and -0.0 included, keep their row order), the same floats
            # summed in the same order, without the positions (most groups hold fewer trades
            # than the posterior asks for)
            values = self._cosines(vector).tolist()
            if math.isfinite(sum(values)):
                return rows, self._row_wins, sum(sorted(values, reverse=True))
        values, order = self._nearest(vector, n)
        pnl = self.pnl
        return len(order), sum(1 for i in order if pnl[i] > 0), sum([values[i] for i in order])

    def _nearest(self, vector: Sequence[float], n: int) -> tuple[list[float], list[int]]:
        """The cosines of every row, and the positions of the ``n`` best, best first."""
        if not self.rows:
            return [], []
        sims = self._cosines(vector)
        values = sims.tolist()
        order = _top_small(values, n)
        if order is None:
            order = top_positions(sims, n).tolist()
        return values, order

    def _cosines(self, vector: Sequence[float]) -> np.ndarray:
        if self._matrix is None:
            self._matrix = np.vstack(self.rows)
        sims: np.ndarray = self._matrix @ query_unit(vector)
        return sims


def _top_small(values: list[float], n: int) -> list[int] | None:
    """``top_positions`` in Python, for a few finite values; None where it may answer otherwise
    (a NaN; a tie across the ``n``-th place, which ``np.argpartition`` settles its own way). A
    stable sort keeps equal values in position order, as the lexsort does."""
    if len(values) > SMALL_BLOCK or not math.isfinite(sum(values)):
        return None
    order = sorted(range(len(values)), key=values.__getitem__, reverse=True)
    if len(order) > n:
        if n <= 0 or values[order[n - 1]] == values[order[n]]:
            return None
        del order[n:]
    return order
