"""The MemoryStore contract: what every ``memory.port.MemoryStore`` must do, against the port only.

Subclass ``MemoryStoreContract`` and provide a ``store`` fixture yielding a FRESH, empty store.
"""

from __future__ import annotations

import pytest

from memory.model import Insight, NeighbourSummary, Situation, Trade
from memory.port import CandidateQuery, MemoryStore

DAY_MS = 86_400_000


def make_trade(
    n: int,
    *,
    ticker: str = "SOL/USDT",
    regime: str = "medium_volatility",
    pnl: float = -4.2,
    rsi: float = 71.0,
) -> Trade:
    entry, exit_ = 1_740_000_000_000 + n * 3_600_000, 1_740_000_000_000 + n * 3_600_000 + 32_400_000
    situation = Situation.from_features({"rsi_1h": rsi, "return_1h_pct": 0.8}, regime)
    return Trade(
        trade_id=Trade.make_id(ticker, entry, exit_),
        ticker=ticker,
        entry_ms=entry,
        exit_ms=exit_,
        entry_price=150.0,
        exit_price=150.0 * (1 + pnl / 100),
        pnl_pct=pnl,
        fees_usd=0.12,
        holding_secs=32_400.0,
        exit_reason="stop_loss",
        signals={"momentum": 0.6},
        confidence=0.7,
        decided_by="fallback",
        decision_id=f"d{n}",
        regime=regime,
        situation=situation,
    )


def make_insight(
    text: str,
    *,
    created_ms: int = 1_740_000_000_000,
    ticker: str | None = "SOL/USDT",
    regime: str | None = "medium_volatility",
    kind: str = "reflection",
    vector: tuple[float, ...] | None = None,
    trade_id: str | None = None,
    summarises: tuple[str, ...] = (),
    salience: float = 0.5,
) -> Insight:
    return Insight(
        insight_id=Insight.make_id(kind, created_ms, ticker, text),
        text=text,
        kind=kind,
        salience=salience,
        author="rules",
        summary_source="rules",
        created_ms=created_ms,
        ticker=ticker,
        regime=regime,
        trade_id=trade_id,
        summarises=summarises,
        situation_vector=vector,
        embedding=(1.0, 0.0, 0.0),
    )


class MemoryStoreContract:
    @pytest.fixture
    def store(self) -> MemoryStore:
        raise NotImplementedError

    async def test_trade_round_trip_and_idempotent_write(self, store: MemoryStore) -> None:
        trade = make_trade(1)
        assert await store.put_trade(trade) is True
        assert await store.put_trade(trade) is False  # a retried write is the same write
        assert await store.get_trade(trade.trade_id) == trade
        assert (await store.counts())["trades"] == 1
        assert (await store.counts())["situations"] == 1

    async def test_insight_round_trip_and_idempotent_write(self, store: MemoryStore) -> None:
        insight = make_insight("[SOL] medium_volatility, RSI 71 entry: stop loss")
        assert await store.put_insight(insight) is True
        assert await store.put_insight(insight) is False
        assert await store.get_insight(insight.insight_id) == insight
        assert await store.get_insight("i-missing") is None

    async def test_list_is_newest_first_and_filtered(self, store: MemoryStore) -> None:
        old = make_insight("an older lesson about SOL", created_ms=1_000)
        new = make_insight("a newer lesson about SOL", created_ms=2_000)
        eth = make_insight("a lesson about ETH only", created_ms=3_000, ticker="ETH/USDT")
        for item in (old, new, eth):
            await store.put_insight(item)
        listed = await store.list_insights(ticker="SOL/USDT")
        assert [i.insight_id for i in listed] == [new.insight_id, old.insight_id]
        assert len(await store.list_insights()) == 3
        assert len(await store.list_insights(kind="person")) == 0

    async def test_forget_removes_one_item(self, store: MemoryStore) -> None:
        insight = make_insight("forget me, I was wrong about this")
        trade = make_trade(2)
        await store.put_insight(insight)
        await store.put_trade(trade)
        assert await store.forget(insight.insight_id) is True
        assert await store.forget(trade.trade_id) is True
        assert await store.forget("i-nothing") is False
        assert await store.get_insight(insight.insight_id) is None
        assert await store.get_trade(trade.trade_id) is None

    async def test_candidates_rank_by_situation_similarity(self, store: MemoryStore) -> None:
        hot = Situation.from_features({"rsi_1h": 80.0}, "medium_volatility").vector
        cold = Situation.from_features({"rsi_1h": 20.0}, "low_volatility").vector
        near = make_insight("overbought entries lost", vector=hot, created_ms=1)
        far = make_insight("oversold entries won", vector=cold, created_ms=2)
        other = make_insight("ETH lesson, never for SOL", vector=hot, ticker="ETH/USDT")
        for item in (near, far, other):
            await store.put_insight(item)
        found = await store.candidates(CandidateQuery(ticker="SOL/USDT", vector=hot, limit=5))
        assert [i.insight_id for i, _ in found] == [near.insight_id, far.insight_id]
        assert found[0][1] == pytest.approx(1.0, abs=1e-5)
        assert found[1][1] < found[0][1]

    async def test_candidates_by_text_embedding(self, store: MemoryStore) -> None:
        await store.put_insight(make_insight("text lesson about momentum"))
        found = await store.candidates(
            CandidateQuery(ticker="SOL/USDT", embedding=(1.0, 0.0, 0.0), limit=3)
        )
        assert len(found) == 1
        assert found[0][1] == pytest.approx(1.0, abs=1e-5)

    async def test_rollup_archives_what_it_summarises(self, store: MemoryStore) -> None:
        children = [make_insight(f"lesson number {n} of many", created_ms=n) for n in range(3)]
        for child in children:
            await store.put_insight(child)
        rollup = make_insight(
            "three lessons rolled into one",
            kind="rollup",
            created_ms=10,
            summarises=tuple(c.insight_id for c in children),
        )
        await store.put_insight(rollup)
        live = await store.list_insights()
        assert [i.insight_id for i in live] == [rollup.insight_id]
        assert len(await store.list_insights(include_archived=True)) == 4
        found = await store.candidates(CandidateQuery(ticker="SOL/USDT", limit=10))
        assert [i.insight_id for i, _ in found] == [rollup.insight_id]
        assert (await store.counts())["archived_insights"] == 3

    async def test_regime_stats(self, store: MemoryStore) -> None:
        for n, pnl in enumerate((-4.0, 2.0, 6.0)):
            await store.put_trade(make_trade(n, pnl=pnl))
        await store.put_trade(make_trade(9, regime="high_volatility", pnl=-1.0))
        stats = await store.regime_stats(ticker="SOL/USDT", regime=None)
        by_regime = {s.regime: s for s in stats}
        medium = by_regime["medium_volatility"]
        assert (medium.n, medium.wins) == (3, 2)
        assert medium.win_rate == pytest.approx(2 / 3)
        assert medium.mean_pnl_pct == pytest.approx(4 / 3)
        assert by_regime["high_volatility"].n == 1

    async def test_neighbour_trades_most_similar_first(self, store: MemoryStore) -> None:
        await store.put_trade(make_trade(1, rsi=80.0, pnl=-3.0))
        await store.put_trade(make_trade(2, rsi=25.0, pnl=5.0))
        query = Situation.from_features({"rsi_1h": 79.0, "return_1h_pct": 0.8}, "medium_volatility")
        found = await store.neighbour_trades(
            ticker="SOL/USDT", regime="medium_volatility", vector=query.vector, n=5
        )
        assert [t.pnl_pct for t in found] == [-3.0, 5.0]
        assert found[0].sim > found[1].sim

    async def test_neighbour_summary_counts_the_neighbour_trades(self, store: MemoryStore) -> None:
        for n, (rsi, pnl) in enumerate([(80.0, -3.0), (25.0, 5.0), (60.0, 0.0), (70.0, 1.5)]):
            await store.put_trade(make_trade(n, rsi=rsi, pnl=pnl))
        for rsi, n, regime in [(79.0, 5, "medium_volatility"), (30.0, 2, "medium_volatility"),
                               (50.0, 3, "low_volatility")]:  # fmt: skip
            vector = Situation.from_features({"rsi_1h": rsi}, "medium_volatility").vector
            where = {"ticker": "SOL/USDT", "regime": regime, "vector": vector, "n": n}
            summary = await store.neighbour_summary(**where)  # type: ignore[arg-type]
            trades = await store.neighbour_trades(**where)  # type: ignore[arg-type]
            assert summary == NeighbourSummary.of(trades)
            assert summary.trades == min(n, 4 if regime == "medium_volatility" else 0)

    async def test_export_holds_everything(self, store: MemoryStore) -> None:
        await store.put_trade(make_trade(1))
        await store.put_insight(make_insight("exported lesson text"))
        rows = await store.export()
        assert [r["type"] for r in rows] == ["trade", "insight"]
        assert Trade.model_validate({k: v for k, v in rows[0].items() if k != "type"})
