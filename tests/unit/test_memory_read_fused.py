"""The decision path's leaner memory reads answer what the plain reads answer, bit for bit.

- ``query_unit`` knows a tuple asked with again by identity: the same array as the bytes key
  gives, never for a list (a list may change between two asks), signed zeros kept apart.
- ``neighbour_summary`` (``TradeGroup.nearest_summary``) against ``NeighbourSummary.of`` the
  models of ``neighbour_trades``, the cosines' sum compared as float bits.
- The snapshot's budget walk, which makes a tail item only when it reaches it, against making
  every item and cutting the list.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import orjson
from fakes.fixed_clock import FixedClock
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memory_look_support import count_looks
from property_budget import examples

from agent.memory_view import _by_score, _within_budget
from contract.memory_contract import DAY_MS, make_insight, make_trade
from memory.config import RetrievalConfig
from memory.context import InsightItem
from memory.insight_source import LESSON_KINDS, RetrieverInsights
from memory.model import REGIME_LABELS, VECTOR_DIM, NeighbourSummary
from memory.port import CandidateQuery
from memory.retrieval import Retriever, Row, row_ranked
from memory.sqlite_index import TradeGroup, query_unit, unit
from memory.sqlite_store import SqliteMemoryStore

NOW = 1_740_000_000_000 + 30 * DAY_MS
TICKERS = ("SOL/USDT", "ETH/USDT", None)
REGIMES = (*REGIME_LABELS[:2], None)


def _vector(rng: np.random.Generator) -> tuple[float, ...]:
    # few distinct values: exact ties, and signed zeros
    return tuple(float(v) for v in rng.choice([-1.0, -0.0, 0.0, 0.5, 2.0], VECTOR_DIM))


def test_query_unit_by_identity_is_the_bytes_answer() -> None:
    rng = np.random.default_rng(5)
    vectors = [_vector(rng) for _ in range(40)]  # more than the identity memo holds
    for _ in range(2):
        for vector in vectors:
            got = query_unit(vector)
            assert got.tobytes() == unit(np.asarray(vector, dtype=np.float32)).tobytes()
            assert query_unit(vector) is got  # the second ask of the very tuple
    plus = (0.0,) * (VECTOR_DIM - 1) + (1.0,)
    minus = (-0.0,) * (VECTOR_DIM - 1) + (1.0,)
    assert query_unit(plus).tobytes() != query_unit(minus).tobytes()


def test_query_unit_never_remembers_a_list_by_identity() -> None:
    values = [1.0] * VECTOR_DIM
    first = query_unit(values).tobytes()
    values[0] = -3.0  # the same list object, changed
    assert query_unit(values).tobytes() == unit(np.asarray(values, dtype=np.float32)).tobytes()
    assert query_unit(values).tobytes() != first


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), trades=st.integers(0, 30), n=st.integers(1, 25))
def test_neighbour_summary_is_the_summary_of_the_models(seed: int, trades: int, n: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(_check_summary(Path(tmp) / "m.db", seed, trades, n))


async def _check_summary(path: Path, seed: int, trades: int, n: int) -> None:
    store = SqliteMemoryStore(path)
    rng = np.random.default_rng(seed)
    for i in range(trades):
        # pnl 0.0 is no win
        pnl = float(rng.choice([-2.0, 0.0, 1.5]))
        # mostly distinct cosines (a sum in another order would show), some exact ties
        rsi = float(rng.choice([30.0, 55.0])) if rng.random() < 0.2 else float(rng.uniform(5, 95))
        regime = ("medium_volatility", "low_volatility")[int(rng.integers(0, 2))]
        await store.put_trade(make_trade(i, pnl=pnl, rsi=rsi, regime=regime))
    vector = tuple(float(v) for v in rng.normal(size=VECTOR_DIM))
    for regime in ("medium_volatility", "low_volatility", "high_volatility"):
        kw: dict[str, Any] = {"ticker": "SOL/USDT", "regime": regime, "vector": vector, "n": n}
        expected = NeighbourSummary.of(await store.neighbour_trades(**kw))
        got = await store.neighbour_summary(**kw)
        assert (got.trades, got.wins) == (expected.trades, expected.wins)
        assert float(got.sim_sum).hex() == float(expected.sim_sum).hex()
    await store.close()


def _eager(head: list[dict[str, Any]], tail: list[tuple[str, Row]], budget: int) -> list[Any]:
    """The walk as it was: every hit made and every item built first (``**hit.parts()``),
    sorted by ``-score``, then cut at the first that passes."""
    items = list(head)
    made: list[dict[str, Any]] = []
    for ticker, row in tail:
        hit = row_ranked(row)
        made.append(
            {
                "kind": "insight",
                "id": hit.insight.insight_id,
                "ticker": ticker,
                "insight_kind": hit.insight.kind,
                "text": hit.insight.text,
                **hit.parts(),
            }
        )
    made.sort(key=lambda item: -item["score"])
    items += made
    kept: list[dict[str, Any]] = []
    used = 0
    for item in items:
        size = len(orjson.dumps(item))
        if used + size > budget:
            break
        kept.append(item)
        used += size
    return kept


def _row(text: str, score: float, position: int) -> Row:
    insight = make_insight(text if text.strip() else "x", created_ms=NOW - position)
    sim, age = 0.123456789 * position, 1.23456 * position
    return (-score, -insight.created_ms, insight.insight_id, position, insight, sim, 1.0, age)


@settings(max_examples=examples(100), deadline=None)
@given(
    heads=st.lists(st.text(max_size=120), max_size=5),
    tails=st.lists(st.tuples(st.text(min_size=1, max_size=80), st.floats(-1, 2)), max_size=8),
    budget=st.integers(0, 700),
)
def test_budget_walk_makes_what_the_eager_walk_keeps(
    heads: list[str], tails: list[tuple[str, float]], budget: int
) -> None:
    head = [{"kind": "posterior", "note": text} for text in heads]
    tail = [("SOL/USDT", _row(text, score, n)) for n, (text, score) in enumerate(tails)]
    lazy = sorted(tail, key=_by_score)
    assert _within_budget(head, lazy, budget) == _eager(head, tail, budget)


def test_budget_walk_stops_at_the_first_item_past_the_budget() -> None:
    head = [{"kind": "posterior", "note": "x" * 200}, {"kind": "posterior", "note": ""}]
    tail = [("SOL/USDT", _row("a short lesson", 0.4, 1))]
    for budget in (0, 100, 250, 600, 2000):
        # a smaller item after one that did not fit stays out, as in the eager walk
        assert _within_budget(head, tail, budget) == _eager(head, tail, budget)
    assert _within_budget(head, tail, 100) == []


async def test_prompt_items_are_those_of_the_ranked_hits(tmp_path: Path) -> None:
    store = SqliteMemoryStore(tmp_path / "m.db")
    rng = np.random.default_rng(3)
    for i in range(12):
        await store.put_insight(
            make_insight(
                f"lesson number {i} on the market",
                created_ms=NOW - i * DAY_MS,
                regime=REGIMES[i % 3],
                vector=_vector(rng),
                salience=float(rng.random()),
            )
        )
    vector = _vector(rng)
    retriever = Retriever(store, RetrievalConfig(score_cutoff=-1.0))
    source = RetrieverInsights(retriever, FixedClock(NOW), lambda _t: vector)
    for regime in REGIMES:
        hits = await retriever.ranked(
            now_ms=NOW, ticker="SOL/USDT", regime=regime, vector=vector, kinds=LESSON_KINDS, k=4
        )
        expected = [
            InsightItem(
                text=h.insight.text,
                score=h.score,
                ticker=h.insight.ticker,
                insight_id=h.insight.insight_id,
                created_ms=h.insight.created_ms,
            )
            for h in hits
        ]
        assert hits and await source.top_insights("SOL/USDT", regime, 4) == expected
    await store.close()


async def test_reading_nests_and_lets_go_after_an_error(tmp_path: Path) -> None:
    store = SqliteMemoryStore(tmp_path / "m.db")
    looks = count_looks(store)
    query = CandidateQuery(ticker="SOL/USDT")
    with store.reading():
        with store.reading():
            await store.candidates(query)
        await store.candidates(query)  # still held by the outer one
    assert looks() == 1
    try:
        with store.reading():
            raise ValueError("a read failed")
    except ValueError:
        pass
    await store.candidates(query)  # let go: a call outside looks again
    assert looks() == 3
    await store.close()


#: exact ties and signed zeros, and values whose sums depend on their order
_coordinate = st.sampled_from([-1.0, -0.0, 0.0, 0.5, 2.0]) | st.floats(-3.0, 3.0)


def _plain_summary(group: TradeGroup, vector: tuple[float, ...], n: int) -> tuple[int, int, str]:
    """``nearest``'s triples summarised one by one: the definition the summary answers by."""
    found = group.nearest(vector, n)
    sims = [sim for _, _, sim in found]
    return len(found), sum(1 for _, pnl, _ in found if pnl > 0), float(sum(sims)).hex()


@settings(max_examples=examples(300), deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.sampled_from([-2.0, -0.0, 0.0, 1.5, float("nan")]),  # pnl: 0.0 and NaN no wins
            st.lists(_coordinate, min_size=3, max_size=3) | st.none(),  # None: no row
        ),
        max_size=30,
    ),
    query=st.lists(_coordinate | st.just(float("nan")), min_size=3, max_size=3),
    n=st.integers(1, 35),
)
def test_nearest_summary_of_a_group_is_its_neighbours_summarised(
    rows: list[tuple[float, list[float] | None]], query: list[float], n: int
) -> None:
    """Every row a neighbour (n at least the rows) or not, cosines tied, signed zeros, a NaN
    query (the general path): the count, the wins and the cosines' sum's bits as the triples
    give them, asked twice (the second ask reads the memoised query unit)."""
    group = TradeGroup()
    for i, (pnl, values) in enumerate(rows):
        vector = None
        if values is not None:
            vector = np.zeros(VECTOR_DIM, dtype=np.float32)
            vector[: len(values)] = values
        group.add(f"t{i}", pnl, 60.0, vector)
    asked = tuple(query) + (0.0,) * (VECTOR_DIM - len(query))
    for _ in range(2):
        trades, wins, sim_sum = group.nearest_summary(asked, n)
        assert (trades, wins, float(sim_sum).hex()) == _plain_summary(group, asked, n)


def test_nearest_summary_sums_the_cosines_best_first() -> None:
    """Four cosines of 2**-54 beside one of 1.0: best first each is lost against the 1.0 (the
    sum stays 1.0), summed first they would make 2**-52 and count."""
    group = TradeGroup()
    for i, tiny in enumerate([0.0, 2.0**-54, 2.0**-54, 2.0**-54, 2.0**-54]):
        vector = np.zeros(VECTOR_DIM, dtype=np.float32)
        vector[0], vector[1] = (1.0, 0.0) if i == 0 else (tiny, 1.0)
        group.add(f"t{i}", 1.0, 60.0, vector)
    asked = (1.0,) + (0.0,) * (VECTOR_DIM - 1)
    assert group.nearest_summary(asked, 20) == (5, 5, 1.0)
    assert group.nearest_summary(asked, 20)[2].hex() == _plain_summary(group, asked, 20)[2]
