"""The SQLite store's vectorised candidate query (per-ticker blocks of unit vectors, numpy) returns
what the straightforward scoring returns: every live insight filtered in Python, cosine in float64,
best first, ties to the older then the lower id. Random data (hypothesis), queried after the index loads
and again after more writes were appended to it, including a rollup that archives some."""

from __future__ import annotations

import asyncio
import math
import tempfile
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_budget import examples

from contract.memory_contract import make_insight
from memory.model import REGIME_LABELS, VECTOR_DIM, Insight
from memory.port import CandidateQuery
from memory.sqlite_store import SqliteMemoryStore

TICKERS = ("BTC/USDT", "ETH/USDT", None)
REGIMES = (*REGIME_LABELS[:2], None)
T0 = 1_740_000_000_000


def _insights(seed: int, n: int, start: int) -> list[Insight]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(start, start + n):
        vector = None
        if rng.random() < 0.85:
            # few distinct values, so exact ties happen and the tie-break is exercised
            vector = tuple(float(v) for v in rng.integers(-2, 3, VECTOR_DIM))
        out.append(
            make_insight(
                f"insight number {i} about the market",
                created_ms=T0 + int(rng.integers(0, 1000)) * 60_000,
                ticker=TICKERS[int(rng.integers(0, 3))],
                regime=REGIMES[int(rng.integers(0, 3))],
                kind=("reflection", "person")[int(rng.integers(0, 2))],
                vector=vector,
            )
        )
    return out


def _reference(
    written: list[Insight], archived: set[str], query: CandidateQuery
) -> list[tuple[float, int]]:
    """Every eligible insight as (key, position written), best first: key = cosine, or
    created_ms for a query without a vector (newest first)."""
    rows: list[tuple[float, int]] = []
    for seq, item in enumerate(written):
        if item.insight_id in archived:
            continue
        if item.created_ms < query.min_created_ms:
            continue
        if query.max_created_ms is not None and item.created_ms > query.max_created_ms:
            continue
        if query.ticker is not None and item.ticker not in (None, query.ticker):
            continue
        if query.regime is not None and item.regime not in (None, query.regime):
            continue
        if query.kinds and item.kind not in query.kinds:
            continue
        if query.vector is None:
            rows.append((float(item.created_ms), seq))
        elif item.situation_vector is None:
            rows.append((query.unsituated_sim, seq))
        else:
            a, b = np.asarray(item.situation_vector), np.asarray(query.vector)
            norm = math.hypot(*a) * math.hypot(*b)
            rows.append((float(a @ b / norm) if norm > 0 else 0.0, seq))
    rows.sort(key=lambda r: (-r[0], written[r[1]].created_ms, written[r[1]].insight_id))
    return rows


queries = st.builds(
    CandidateQuery,
    ticker=st.sampled_from(TICKERS),
    regime=st.sampled_from(REGIMES),
    kinds=st.sampled_from([(), ("reflection",), ("person",), ("reflection", "person")]),
    vector=st.one_of(
        st.none(),
        st.lists(st.integers(-2, 2), min_size=VECTOR_DIM, max_size=VECTOR_DIM).map(
            lambda v: tuple(float(x) for x in v)
        ),
    ),
    embedding=st.none(),  # a situation query (a tuple's defaults are drawn unless given)
    min_created_ms=st.integers(T0, T0 + 1000 * 60_000),
    max_created_ms=st.one_of(st.none(), st.integers(T0, T0 + 1000 * 60_000)),
    limit=st.integers(1, 20),
    unsituated_sim=st.just(CandidateQuery().unsituated_sim),
)


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), first=st.integers(0, 60), more=st.integers(0, 40),
       query=queries)  # fmt: skip
def test_fast_candidates_equal_the_straightforward_scoring(
    seed: int, first: int, more: int, query: CandidateQuery
) -> None:
    asyncio.run(_check(seed, first, more, query))


async def _check(seed: int, first: int, more: int, query: CandidateQuery) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteMemoryStore(Path(tmp) / "memory.db")
        written: list[Insight] = []
        archived: set[str] = set()
        try:
            for batch in (_insights(seed, first, 0), _insights(seed + 1, more, first)):
                for item in batch:
                    await store.put_insight(item)
                    written.append(item)
                await _compare(store, written, archived, query)  # loaded, then appended
            children = tuple(i.insight_id for i in written[:3])
            if children:
                rollup = make_insight("rollup of three", kind="rollup", summarises=children)
                await store.put_insight(rollup)
                written.append(rollup)
                archived.update(children)
                await _compare(store, written, archived, query)
        finally:
            await store.close()


async def _compare(
    store: SqliteMemoryStore, written: list[Insight], archived: set[str], query: CandidateQuery
) -> None:
    got = await store.candidates(query)
    eligible = _reference(written, archived, query)
    expected = eligible[: query.limit]
    assert len(got) == len(expected)
    by_id = {i.insight_id: i for i in written}
    for rank, (insight, sim) in enumerate(got):
        assert insight == by_id[insight.insight_id]
        key, seq = expected[rank]
        if query.vector is None:
            assert sim == 0.0 and insight.created_ms == key
        else:
            assert abs(sim - key) < 1e-5, (rank, sim, expected)
        # the same item, unless another eligible one is within float32 rounding of its key
        # (a float32 tie may then be ordered either way); exact ties: older, then lower id
        near = [s for k, s in eligible if abs(k - key) < 1e-5 and s != seq]
        if (
            query.vector is None
            or not near
            or all(written[s].situation_vector == written[seq].situation_vector for s in near)
        ):
            assert insight.insight_id == written[seq].insight_id, (rank, expected)
