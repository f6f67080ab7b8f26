"""The insight index's cheaper search answers bit for bit what the plain numpy search answered:
the same ids in the same order with the same float32 sims (they are rounded into the journal).

The reference below is the index's search as it was before the small-block path, the filter memo
and the query-vector memo: ``np.isin`` masks, a fresh unit vector per query, a key sort. Random
blocks (hypothesis) of a few rows (the Python path) and of more than ``SMALL_BLOCK`` rows (numpy),
with exact ties, rows without a vector, signed zeros and the odd NaN row.
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_budget import examples

from memory.model import VECTOR_DIM
from memory.port import CandidateQuery
from memory.sqlite_index import (
    SMALL_BLOCK,
    InsightIndex,
    TradeGroup,
    _Block,
    query_unit,
    top_positions,
    unit,
)

TICKERS = ("BTC/USDT", "ETH/USDT", None)
REGIMES = ("low_volatility", "medium_volatility", None)
KINDS = ("reflection", "person", "rollup", "debate")
T0 = 1_740_000_000_000


def _reference_best(
    block: _Block, query: CandidateQuery, codes: dict[str | None, int], q: np.ndarray | None
) -> list[tuple[float, int, str]]:
    a = block.arrays()
    mask = a["created"] >= query.min_created_ms
    if query.max_created_ms is not None:
        mask &= a["created"] <= query.max_created_ms
    if query.regime is not None:
        mask &= (a["regime"] == 0) | (a["regime"] == codes.get(query.regime, -1))
    if query.kinds:
        mask &= np.isin(a["kind"], [codes.get(k, -1) for k in query.kinds])
    rows = np.flatnonzero(mask)
    if q is None:
        keys = a["created"][rows].astype(np.float64)
    else:
        sims = a["matrix"][rows] @ q if len(rows) < len(mask) // 2 else (a["matrix"] @ q)[rows]
        keys = np.where(a["has_vector"][rows], sims, np.float32(query.unsituated_sim))
    if len(keys) > query.limit:
        last_place = np.partition(keys, len(keys) - query.limit)[len(keys) - query.limit]
        chosen = np.flatnonzero(keys >= last_place)
    else:
        chosen = np.arange(len(keys))
    created = a["created"]
    return [(float(keys[i]), int(created[rows[i]]), block.ids[rows[i]]) for i in chosen]


def _reference_top(index: InsightIndex, query: CandidateQuery) -> list[tuple[str, float]]:
    names = list(index.blocks) if query.ticker is None else [query.ticker, None]
    q = None if query.vector is None else unit(np.asarray(query.vector, dtype=np.float32))
    found = [
        row
        for name in names
        if name in index.blocks
        for row in _reference_best(index.blocks[name], query, index.codes, q)
    ]
    found.sort(key=lambda row: (-row[0], row[1], row[2]))
    return [(i, 0.0 if q is None else key) for key, _, i in found[: query.limit]]


def _bits(rows: list[tuple[str, float]]) -> list[tuple[str, str]]:
    """Ids and the exact bits of each sim (0.0 and -0.0 differ, NaN equals NaN)."""
    return [(insight_id, sim.hex()) for insight_id, sim in rows]


def _index(seed: int, n: int, nan_rows: bool, in_order: bool) -> InsightIndex:
    """``in_order``: rows appended in created_ms order, as the store loads them."""
    rng = np.random.default_rng(seed)
    index = InsightIndex()
    stamps = [T0 + int(rng.integers(0, 1000)) * 60_000 for _ in range(n)]
    for i, created in enumerate(sorted(stamps) if in_order else stamps):
        vector = None
        if rng.random() < 0.85:
            # few distinct values: exact ties in sim happen and the tie-break is exercised
            vector = rng.integers(-2, 3, VECTOR_DIM).astype(np.float32)
            if nan_rows and rng.random() < 0.05:
                vector[int(rng.integers(0, VECTOR_DIM))] = np.nan
        index.append_row(
            f"i-{i:04d}",
            TICKERS[int(rng.integers(0, 3))],
            REGIMES[int(rng.integers(0, 3))],
            KINDS[int(rng.integers(0, 4))],
            created,
            vector,
        )
    return index


signed = st.sampled_from([-2.0, -1.0, -0.0, 0.0, 1.0, 2.0, 0.5])
queries = st.builds(
    CandidateQuery,
    ticker=st.sampled_from(TICKERS),
    regime=st.sampled_from(("low_volatility", "medium_volatility", "high_volatility", None)),
    kinds=st.sampled_from([(), ("reflection",), ("person", "rollup"), ("reflection", "rollup", "person")]),
    vector=st.one_of(st.none(), st.lists(signed, min_size=VECTOR_DIM, max_size=VECTOR_DIM).map(tuple)),
    embedding=st.none(),  # a situation query (a tuple's defaults are drawn unless given)
    min_created_ms=st.integers(T0, T0 + 1000 * 60_000),
    max_created_ms=st.one_of(st.none(), st.integers(T0, T0 + 1000 * 60_000)),
    limit=st.integers(1, 20),
    unsituated_sim=st.sampled_from([0.5, -0.25]),
)  # fmt: skip


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.one_of(st.integers(1, 60), st.integers(SMALL_BLOCK * 4, SMALL_BLOCK * 6)),
    nan_rows=st.booleans(),
    in_order=st.booleans(),
    query=queries,
    again=queries,
)
def test_top_equals_the_plain_numpy_search_bit_for_bit(
    seed: int, n: int, nan_rows: bool, in_order: bool, query: CandidateQuery, again: CandidateQuery
) -> None:
    index = _index(seed, n, nan_rows, in_order)
    for q in (query, again, query):  # the second time through: filters and unit vector memoised
        assert _bits(index.top(q)) == _bits(_reference_top(index, q))
    # a regime first seen in another block gets its code there: this block's memo stays right
    index.append_row("i-other", "XRP/USDT", query.regime, "rollup", T0, None)
    assert _bits(index.top(query)) == _bits(_reference_top(index, query))
    index.append_row("i-late", query.ticker, query.regime, "reflection", T0 + 10**9, None)
    assert _bits(index.top(query)) == _bits(_reference_top(index, query))  # memos dropped
    index.append_row("i-early", query.ticker, None, "person", T0 - 1, None)  # out of order now
    assert _bits(index.top(query)) == _bits(_reference_top(index, query))


@settings(max_examples=examples(100), deadline=None)
@given(vector=st.lists(signed, min_size=VECTOR_DIM, max_size=VECTOR_DIM).map(tuple))
def test_query_unit_is_unit_of_the_float32_vector(vector: tuple[float, ...]) -> None:
    expected = unit(np.asarray(vector, dtype=np.float32)).tobytes()
    first, second = query_unit(vector), query_unit(list(vector))
    assert first.tobytes() == expected and second.tobytes() == expected
    assert not first.flags.writeable  # shared between callers: nobody may change it


def test_query_unit_keeps_signed_zeros_apart() -> None:
    plus = (0.0,) * (VECTOR_DIM - 1) + (1.0,)
    minus = (-0.0,) * (VECTOR_DIM - 1) + (1.0,)
    assert plus == minus  # equal as tuples, so a key on the tuple would mix them up
    assert query_unit(plus).tobytes() != query_unit(minus).tobytes()
    assert query_unit(minus).tobytes() == unit(np.asarray(minus, dtype=np.float32)).tobytes()


@settings(max_examples=examples(60), deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 40), k=st.integers(1, 25))
def test_trade_neighbours_equal_the_plain_search(seed: int, n: int, k: int) -> None:
    rng = np.random.default_rng(seed)
    group = TradeGroup()
    for i in range(n):
        group.add(
            f"t-{i}", float(rng.normal()), 60.0, rng.integers(-2, 3, VECTOR_DIM).astype(np.float32)
        )
    vector = tuple(float(v) for v in rng.integers(-2, 3, VECTOR_DIM))
    matrix = np.vstack(group.rows)
    sims = matrix @ unit(np.asarray(vector, dtype=np.float32))
    expected = [(group.ids[i], group.pnl[i], float(sims[i])) for i in top_positions(sims, k)]
    got = group.nearest(vector, k)
    assert [(t, p, s.hex()) for t, p, s in got] == [(t, p, s.hex()) for t, p, s in expected]
    assert all(math.isfinite(s) for _, _, s in got)


@settings(max_examples=examples(60), deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 60),
    nan_rows=st.booleans(),
    vector=st.lists(signed, min_size=VECTOR_DIM, max_size=VECTOR_DIM).map(tuple),
    limit=st.integers(1, 20),
)
def test_unfiltered_top_at_every_ttl_cut_is_the_plain_search(
    seed: int, n: int, nan_rows: bool, vector: tuple[float, ...], limit: int
) -> None:
    """The snapshot's query (no regime, no kinds): its sims are the product's from the TTL cut
    on; every cut of the rows (each created_ms an edge), as the plain search answers."""
    index = _index(seed, n, nan_rows, in_order=True)
    stamps = sorted(created for block in index.blocks.values() for created in block.created)
    for oldest in sorted({*stamps, stamps[-1] + 1} | {s + 1 for s in stamps}):
        for ticker in TICKERS:
            query = CandidateQuery(
                ticker=ticker, regime=None, kinds=(), vector=vector,
                min_created_ms=oldest, limit=limit,
            )  # fmt: skip
            assert _bits(index.top(query)) == _bits(_reference_top(index, query))
