"""The decision path's cheaper memory reads: each answers what the plain read answered.

- ``Retriever.ranked`` (plain values, models only for the k kept) against the scoring as it was:
  a ``ScoreParts`` and a ``ScoredInsight`` per candidate, sorted on the models.
- ``regime_stats`` (memoised while no trade is added) against a store opened afresh on the file.
- ``reading()``: another connection's write is looked for once, at entry; a write landing inside
  is seen by the next call after it. A write of this process never hides another's.
"""

from __future__ import annotations

import asyncio
import sqlite3
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest
from fakes.fixed_clock import FixedClock
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memory_look_support import count_looks
from property_budget import examples

from contract.memory_contract import DAY_MS, make_insight, make_trade
from core.clock import VirtualClock
from memory.config import InsightKind, RetrievalConfig
from memory.context import ContextAssembler
from memory.insight_source import LESSON_KINDS, RetrieverInsights
from memory.model import VECTOR_DIM, NeighbourTrade, ScoredInsight, ScoreParts, Situation
from memory.port import CandidateQuery, MemoryStore, reading
from memory.retrieval import Retriever
from memory.sqlite_index import query_unit
from memory.sqlite_store import SqliteMemoryStore

NOW = 1_740_000_000_000 + 30 * DAY_MS
HOT = Situation.from_features({"rsi_1h": 80.0}, "medium_volatility").vector


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteMemoryStore]:
    store = SqliteMemoryStore(tmp_path / "memory.db")
    yield store
    await store.close()


async def _reference_retrieve(
    store: MemoryStore, cfg: RetrievalConfig, query: CandidateQuery, now_ms: int, k: int
) -> list[ScoredInsight]:
    scored: list[ScoredInsight] = []
    for insight, sim in await store.candidates(query):
        age_days = max(0.0, (now_ms - insight.created_ms) / DAY_MS)
        if insight.ttl_days is not None and age_days > insight.ttl_days:
            continue
        weight = cfg.role_weights.get(insight.kind, 1.0)
        score = (
            sim * weight - cfg.recency_lambda * age_days + cfg.salience_weight * insight.salience
        )
        if score < cfg.score_cutoff:
            continue
        parts = ScoreParts(
            sim=round(sim, 4),
            role_weight=weight,
            age_days=round(age_days, 2),
            salience=insight.salience,
            score=round(score, 4),
        )
        scored.append(ScoredInsight(insight=insight, parts=parts))
    scored.sort(key=lambda s: (-s.parts.score, -s.insight.created_ms, s.insight.insight_id))
    return scored[:k]


@settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(0, 40),
    k=st.integers(1, 8),
    regime=st.sampled_from([None, "medium_volatility"]),
    kinds=st.sampled_from([(), LESSON_KINDS]),
)
def test_ranked_is_the_plain_scoring(
    seed: int, n: int, k: int, regime: str | None, kinds: tuple[InsightKind, ...]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(_check_ranked(Path(tmp) / "memory.db", seed, n, k, regime, kinds))


async def _check_ranked(
    path: Path, seed: int, n: int, k: int, regime: str | None, kinds: tuple[InsightKind, ...]
) -> None:
    store = SqliteMemoryStore(path)
    rng = np.random.default_rng(seed)
    for i in range(n):
        vector = tuple(float(v) for v in rng.integers(-2, 3, VECTOR_DIM))
        item = make_insight(
            f"lesson number {i} about the market",
            created_ms=NOW - int(rng.integers(0, 200)) * DAY_MS // 4,
            regime=("medium_volatility", "low_volatility", None)[int(rng.integers(0, 3))],
            kind=("reflection", "person", "debate")[int(rng.integers(0, 3))],
            vector=None if rng.random() < 0.2 else vector,
            salience=float(rng.integers(0, 5)) / 4,  # ties in score happen
        )
        if rng.random() < 0.2:
            item = item.model_copy(update={"ttl_days": 10})
        await store.put_insight(item)
    cfg = RetrievalConfig(score_cutoff=0.0, ttl_days=40)
    retriever, vector = Retriever(store, cfg), tuple(float(v) for v in rng.integers(-2, 3, 12))
    query = CandidateQuery(
        ticker="SOL/USDT", regime=regime, kinds=kinds, vector=vector,
        min_created_ms=NOW - int(cfg.ttl_days * DAY_MS), limit=k * 3,
    )  # fmt: skip
    expected = await _reference_retrieve(store, cfg, query, NOW, k)
    got = await retriever.retrieve(
        now_ms=NOW, ticker="SOL/USDT", regime=regime, vector=vector, kinds=kinds, k=k
    )
    assert got == expected
    ranked = await retriever.ranked(
        now_ms=NOW, ticker="SOL/USDT", regime=regime, vector=vector, kinds=kinds, k=k
    )
    assert [(h.insight, h.parts()) for h in ranked] == [
        (s.insight, s.parts.model_dump(mode="json")) for s in expected
    ]
    await store.close()


async def test_regime_stats_memo_answers_what_a_fresh_store_answers(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    daemon, cli = SqliteMemoryStore(path), SqliteMemoryStore(path)
    filters = [(None, None), ("SOL/USDT", None), ("SOL/USDT", "medium_volatility"), (None, "x")]
    steps = [
        daemon.put_trade(make_trade(1, pnl=2.0)),
        daemon.put_trade(make_trade(2, regime="low_volatility")),
        cli.put_trade(make_trade(3, pnl=1.5)),  # another connection
        daemon.put_trade(make_trade(4, ticker="ETH/USDT")),
        daemon.forget(make_trade(1).trade_id),
    ]
    for step in steps:
        await step
        fresh = SqliteMemoryStore(path)
        for ticker, regime in filters:
            for _ in range(2):  # computed, then from the memo
                got = await daemon.regime_stats(ticker=ticker, regime=regime)
                assert got == await fresh.regime_stats(ticker=ticker, regime=regime)
        await fresh.close()
    await daemon.close()
    await cli.close()


async def test_a_write_from_another_connection_is_seen_from_the_next_look(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    daemon, cli = SqliteMemoryStore(path), SqliteMemoryStore(path)
    query = CandidateQuery(ticker="SOL/USDT")
    assert await daemon.regime_stats(ticker=None, regime=None) == []  # caches built, empty
    assert await daemon.candidates(query) == []
    with daemon.reading():
        await cli.put_trade(make_trade(1))
        await cli.put_insight(make_insight("a person's lesson from the CLI", kind="person"))
        # inside: the state at entry (one look for the whole snapshot, not one per call)
        assert await daemon.regime_stats(ticker=None, regime=None) == []
        assert await daemon.candidates(query) == []
    (stats,) = await daemon.regime_stats(ticker=None, regime=None)
    assert stats.n == 1
    assert len(await daemon.candidates(query)) == 1
    with reading(daemon):  # a write before entry is seen inside
        await cli.put_trade(make_trade(2))
    with daemon.reading():
        assert (await daemon.regime_stats(ticker=None, regime=None))[0].n == 2
    await daemon.close()
    await cli.close()


async def test_with_a_clock_another_process_write_is_seen_from_the_next_instant(
    tmp_path: Path,
) -> None:
    path = tmp_path / "memory.db"
    clock = VirtualClock(NOW)
    daemon, cli = SqliteMemoryStore(path, clock), SqliteMemoryStore(path)
    query = CandidateQuery(ticker="SOL/USDT")
    looks = count_looks(daemon)
    assert await daemon.candidates(query) == []
    await cli.put_insight(make_insight("a person's lesson from the CLI", kind="person"))
    await daemon.put_trade(make_trade(1))  # an own write at the same instant looks no further
    assert await daemon.candidates(query) == []  # the same instant: one look was taken
    assert looks() == 1
    await clock.advance(0.001)
    assert len(await daemon.candidates(query)) == 1  # the next instant looks again
    assert (await daemon.regime_stats(ticker=None, regime=None))[0].n == 1
    assert looks() == 2
    await daemon.close()
    await cli.close()


async def test_own_write_does_not_hide_an_earlier_write_of_another_process(tmp_path: Path) -> None:
    """data_version moves only for other connections' commits: reading it after an own write
    must not pass over a commit of the CLI that came first."""
    path = tmp_path / "memory.db"
    daemon, cli = SqliteMemoryStore(path), SqliteMemoryStore(path)
    assert await daemon.candidates(CandidateQuery(ticker="SOL/USDT")) == []
    assert await daemon.regime_stats(ticker=None, regime=None) == []
    await cli.put_insight(make_insight("a person's lesson from the CLI", kind="person"))
    await cli.put_trade(make_trade(1))
    await daemon.put_insight(make_insight("the daemon's own reflection on a trade"))
    await daemon.put_trade(make_trade(2))
    assert len(await daemon.candidates(CandidateQuery(ticker="SOL/USDT"))) == 2
    assert (await daemon.regime_stats(ticker=None, regime=None))[0].n == 2
    await daemon.close()
    await cli.close()


async def test_reading_holds_through_a_source_and_is_a_no_op_without_one(
    store: SqliteMemoryStore,
) -> None:
    with reading(object()):  # a store (or source) without reading(): nothing to hold
        pass
    looks = count_looks(store)
    with reading(RetrieverInsights(Retriever(store, RetrievalConfig()), clock=FixedClock(NOW))):
        for _ in range(3):
            await store.candidates(CandidateQuery(ticker="SOL/USDT", vector=HOT))
    assert looks() == 1
    await store.candidates(CandidateQuery(ticker="SOL/USDT", vector=HOT))
    assert looks() == 2  # outside: every call looks again


async def test_prompt_insights_read_once_and_answer_as_per_ticker_calls(
    store: SqliteMemoryStore,
) -> None:
    for n, ticker in enumerate(("SOL/USDT", "ETH/USDT", "SOL/USDT")):
        await store.put_insight(make_insight(f"lesson {n} on {ticker}", ticker=ticker, vector=HOT))
    source = RetrieverInsights(Retriever(store, RetrievalConfig()), FixedClock(NOW), lambda _t: HOT)
    assembler = ContextAssembler(insights=source)
    looks = count_looks(store)
    got = await assembler._insights(["SOL/USDT", "ETH/USDT"], {}, {}, {}, NOW)
    assert looks() == 1  # one data_version look for both tickers, not one each
    alone = [i for t in ("SOL/USDT", "ETH/USDT") for i in await source.top_insights(t, None, 5)]
    assert got == alone and len(got) == 3


async def test_neighbours_are_the_models_built_one_by_one(store: SqliteMemoryStore) -> None:
    for n in range(5):
        await store.put_trade(make_trade(n, pnl=n - 2.0, rsi=60.0 + 5 * n))
    got = await store.neighbour_trades(
        ticker="SOL/USDT", regime="medium_volatility", vector=HOT, n=3
    )
    group = store._trade_groups()[("SOL/USDT", "medium_volatility")]
    expected = [NeighbourTrade(trade_id=t, pnl_pct=p, sim=s) for t, p, s in group.nearest(HOT, 3)]
    assert got == expected and len(got) == 3
    assert query_unit(HOT) is query_unit(HOT)  # the decision's three reads share one unit vector


def test_data_version_moves_only_for_other_connections(tmp_path: Path) -> None:
    """The fact the store's freshness rests on (SQLite documents it for PRAGMA data_version)."""
    path = tmp_path / "v.db"
    one, two = sqlite3.connect(path, isolation_level=None), sqlite3.connect(path)
    one.execute("PRAGMA journal_mode=WAL")
    one.execute("CREATE TABLE t (x)")
    version = one.execute("PRAGMA data_version").fetchone()[0]
    one.execute("INSERT INTO t VALUES (1)")
    assert one.execute("PRAGMA data_version").fetchone()[0] == version
    with two:
        two.execute("INSERT INTO t VALUES (2)")
    assert one.execute("PRAGMA data_version").fetchone()[0] != version
    one.close()
    two.close()
