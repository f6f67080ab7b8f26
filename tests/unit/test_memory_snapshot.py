"""historical_insights in the snapshot, and the fallback's memory rule."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agent.decision import AgentDecision, TradeDecision
from agent.fallback_memory import apply_memory_rule
from agent.indicators import TimeframeSummary
from agent.memory_view import MemoryInsights, MemoryOff, situation_of
from agent.snapshot import MarketSnapshot, TickerSnapshot
from broker.port import Action
from contract.memory_contract import make_insight, make_trade
from core.clock import VirtualClock
from memory.config import MemoryConfig
from memory.model import NeighbourSummary
from memory.port import StoreUnavailableError
from memory.retrieval import Retriever
from memory.sqlite_store import SqliteMemoryStore
from regime.snapshot import RegimeSnapshot

NOW = 1_740_000_000_000 + 40 * 3_600_000


def snapshot(rsi: float = 71.0) -> MarketSnapshot:
    summary = TimeframeSummary(trend=None, bollinger_position=0.8, rsi=rsi)
    view = TickerSnapshot(
        price=150.0, change_1h_pct=0.8, return_4h_pct=1.0, return_24h_pct=2.0, volume_24h=None,
        volume_ratio=None, return_zscore=0.5, multi_tf={"1h": summary},
    )  # fmt: skip
    regime = RegimeSnapshot(
        crypto={"SOL/USDT": "medium_volatility"}, crypto_exposure={"SOL/USDT": 1.0},
        macro="unavailable", macro_exposure=1.0, combined="medium_volatility_unavailable",
        exposure_scale=1.0,
    )  # fmt: skip
    return MarketSnapshot(
        at_ms=NOW, tickers={"SOL/USDT": view}, btc_price=None, btc_change_1h_pct=None,
        btc_change_24h_pct=None, regime=regime, exposure_scale=1.0, open_positions=[],
        portfolio_value=10_000.0, cash=10_000.0, gate_wake_reasons=["agent_timer"],
    )  # fmt: skip


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteMemoryStore]:
    store = SqliteMemoryStore(tmp_path / "memory.db")
    yield store
    await store.close()


def view(store: SqliteMemoryStore, clock: VirtualClock | None = None) -> MemoryInsights:
    config = MemoryConfig()
    return MemoryInsights(store, Retriever(store, config.retrieval), config, clock=clock)


async def test_empty_memory_is_null_with_a_reason(store: SqliteMemoryStore) -> None:
    snap = await view(store).attach(snapshot())
    assert snap.historical_insights is None
    assert snap.unavailable["historical_insights"].startswith("memory is empty")


async def test_items_carry_posterior_stats_and_scored_insights(store: SqliteMemoryStore) -> None:
    for n, pnl in enumerate((-4.0, -3.0, -2.0, 5.0)):
        trade = make_trade(n, pnl=pnl)
        await store.put_trade(trade)
        await store.put_insight(
            make_insight(f"lesson {n} from a SOL trade", created_ms=trade.exit_ms,
                         vector=trade.situation.vector if trade.situation else None)
        )  # fmt: skip
    snap = await view(store).attach(snapshot())
    items = snap.historical_insights
    assert items is not None and "historical_insights" not in snap.unavailable
    posterior = items[0]
    assert posterior["kind"] == "posterior"
    assert (posterior["similar_trades"], posterior["wins"]) == (4, 1)
    assert posterior["posterior_win_rate"] == pytest.approx((2 + 1) / (4 + 4))
    assert posterior["entry_scale"] == pytest.approx(0.75)
    assert items[1]["kind"] == "regime_stats" and items[1]["n"] == 4
    insights = [i for i in items if i["kind"] == "insight"]
    assert insights and all("score" in i and "sim" in i for i in insights)


async def test_a_down_store_is_reported_and_rested(tmp_path: Path) -> None:
    class Down(SqliteMemoryStore):
        calls = 0

        async def neighbour_summary(self, **_kwargs: object) -> NeighbourSummary:
            Down.calls += 1
            raise StoreUnavailableError("neo4j unavailable: connection refused")

    store = Down(tmp_path / "memory.db")
    clock = VirtualClock(NOW)
    insights = view(store, clock)
    first = await insights.attach(snapshot())
    assert first.unavailable["historical_insights"].startswith("memory store unavailable")
    second = await insights.attach(snapshot())
    assert "next try in 60 s" in second.unavailable["historical_insights"]
    assert Down.calls == 1  # the second decision did not wait on the store
    await clock.advance(61)
    await insights.attach(snapshot())
    assert Down.calls == 2


async def test_memory_off_says_so() -> None:
    snap = await MemoryOff().attach(snapshot())
    assert snap.historical_insights is None
    assert snap.unavailable["historical_insights"] == "memory is off (--no-memory)"


def test_situation_uses_the_snapshot_numbers() -> None:
    situation = situation_of(snapshot(rsi=80.0), "SOL/USDT")
    assert situation.features["rsi_1h"] == 80.0
    assert situation.features["funding_pct"] is None  # not in this snapshot: not invented
    assert situation.regime == "medium_volatility"


def _buy(pct: float) -> AgentDecision:
    return AgentDecision(
        decisions=(
            TradeDecision(
                ticker="SOL/USDT", action=Action.BUY, position_pct=pct, reasoning="blend 0.4"
            ),
        ),
        decided_by="fallback",
    )


def test_memory_rule_scales_a_buy_and_says_why() -> None:
    item = {
        "kind": "posterior", "ticker": "SOL/USDT", "regime": "medium_volatility",
        "similar_trades": 4, "wins": 1, "posterior_win_rate": 0.375, "entry_scale": 0.75,
        "prior": "Beta(2,2)",
    }  # fmt: skip
    snap = snapshot().model_copy(update={"historical_insights": [item]})
    (decision,) = apply_memory_rule(_buy(0.10), snap).decisions
    assert decision.position_pct == pytest.approx(0.075)
    assert "memory rule: size x0.75" in decision.reasoning and "1/4 wins" in decision.reasoning


def test_memory_rule_without_memory_changes_nothing() -> None:
    original = _buy(0.10)
    assert apply_memory_rule(original, snapshot()) == original


async def test_regime_stats_items_remembered_are_the_stats_dumped_afresh(tmp_path: Path) -> None:
    """The snapshot's regime_stats items (each object's dump kept while the store hands out the
    same object) against the dump of what a store opened afresh on the file answers: after this
    process's trades, another connection's (the CLI's), and a forgotten trade."""
    path = tmp_path / "memory.db"
    clock = VirtualClock(NOW)
    daemon, cli = SqliteMemoryStore(path, clock), SqliteMemoryStore(path)
    memory = view(daemon, clock)
    steps = [
        daemon.put_trade(make_trade(1, pnl=2.0)),
        daemon.put_trade(make_trade(2, pnl=-1.0)),
        cli.put_trade(make_trade(3, pnl=1.5)),  # another connection
        daemon.put_trade(make_trade(4, regime="low_volatility")),
        daemon.forget(make_trade(1).trade_id),
    ]
    for step in steps:
        await step
        await clock.advance(1.0)  # a new instant: another process's write is looked for
        fresh = SqliteMemoryStore(path)
        want = [
            {"kind": "regime_stats", **stats.model_dump(mode="json")}
            for stats in await fresh.regime_stats(ticker="SOL/USDT", regime="medium_volatility")
        ]
        await fresh.close()
        for _ in range(2):  # dumped, then remembered
            snap = await memory.attach(snapshot())
            items = snap.historical_insights or []
            assert [i for i in items if i["kind"] == "regime_stats"] == want
    await daemon.close()
    await cli.close()


def test_memory_rule_with_no_buy_to_size_answers_the_decision_itself() -> None:
    """Posteriors in the snapshot but no BUY to size (a HOLD, a SELL, a BUY of 0 or of a ticker
    without a posterior): the decision itself, which the copy made before equalled, dump and
    fields set alike."""
    item = {
        "kind": "posterior", "ticker": "SOL/USDT", "regime": "medium_volatility",
        "similar_trades": 4, "wins": 1, "posterior_win_rate": 0.375, "entry_scale": 0.75,
        "prior": "Beta(2,2)",
    }  # fmt: skip
    snap = snapshot().model_copy(update={"historical_insights": [item]})
    unsized = (
        TradeDecision(ticker="SOL/USDT", action=Action.HOLD, reasoning="below entry"),
        TradeDecision(ticker="SOL/USDT", action=Action.SELL, position_pct=0.2),
        TradeDecision(ticker="SOL/USDT", action=Action.BUY, position_pct=0.0),
        TradeDecision(ticker="ETH/USDT", action=Action.BUY, position_pct=0.1),
    )
    for decisions in ((), unsized[:1], unsized):
        original = AgentDecision(decisions=decisions, decided_by="fallback")
        copied = original.model_copy(update={"decisions": decisions})
        got = apply_memory_rule(original, snap)
        assert got is original
        assert got.model_dump(mode="json") == copied.model_dump(mode="json")
        assert got.model_fields_set == copied.model_fields_set
    sized = AgentDecision(decisions=(*unsized, _buy(0.10).decisions[0]), decided_by="fallback")
    assert apply_memory_rule(sized, snap).decisions[-1].position_pct == pytest.approx(0.075)
