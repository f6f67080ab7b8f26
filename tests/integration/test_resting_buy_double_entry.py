"""The double entry, through the real decision path: snapshot builder -> decider -> risk caps
(``agent.risk.risk_context``) -> paper broker. A BUY limit rests unfilled; a minute later the
same BUY is asked again while the market stays above the limit. It must not be placed twice.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pytest

from agent.decision import AgentDecision, TradeDecision
from agent.port import Decider
from agent.prompt_assembly import AssembledPrompt
from agent.risk import RESTING_BUYS_COUNT, RiskConfig, RiskContext, risk_context
from agent.routine import DecisionRoutine
from agent.snapshot import MarketSnapshot
from agent.snapshot_builder import SnapshotBuilder
from broker.paper import PaperBroker
from broker.port import Action
from core.bus import EventBus
from core.clock import VirtualClock
from market.aggregator import CandleArrays
from market.features import TickFeatures
from regime.snapshot import RegimeSnapshot

TICKERS = ("BTC/USDT", "ETH/USDT", "SOL/USDT")
EPOCH_MS = 1_740_787_200_000  # 2025-03-01
ETH = "ETH/USDT"
NO_CANDLES = CandleArrays(np.empty(0, np.int64), *(np.empty(0, np.float64) for _ in range(5)))


class Market:
    """What the snapshot reads as the market, moved by the test; the broker sees the same."""

    def __init__(self, broker: PaperBroker, clock: VirtualClock) -> None:
        self.prices = {"BTC/USDT": 84_000.0, ETH: 2_200.0, "SOL/USDT": 140.0}
        self._broker = broker
        self._clock = clock
        for ticker, price in self.prices.items():
            broker.on_market_price(ticker, price, at_ms=clock.now_ms())

    def trade(self, ticker: str, *, low: float, high: float, close: float) -> None:
        self._broker.on_market_price(ticker, close, low=low, high=high, at_ms=self._clock.now_ms())
        self.prices[ticker] = close

    def last_price(self, ticker: str) -> float | None:
        return self.prices.get(ticker)

    def closed_arrays(self, ticker: str, timeframe: str) -> CandleArrays:
        return NO_CANDLES


class NoFeatures:
    def features(self, ticker: str) -> TickFeatures | None:
        return None


class SameBuyTwice:
    """The decider that asks again: BUY ETH at the same target every time."""

    def __init__(self) -> None:
        self.seen: list[MarketSnapshot] = []

    async def decide(
        self, snapshot: MarketSnapshot, prompt: AssembledPrompt | None = None
    ) -> AgentDecision:
        self.seen.append(snapshot)
        buy = TradeDecision(ticker=ETH, action=Action.BUY, position_pct=0.2, confidence=0.7)
        return AgentDecision(decisions=(buy,), decided_by="fallback", decider_reason="test")


class Gate:
    def update_from_agent(
        self, next_check_seconds: float, wake_conditions: Sequence[Mapping[str, Any]]
    ) -> dict[str, Any]:
        return {"next_check_seconds": next_check_seconds}


class Store:
    def set_agent_memory(self, text: str) -> str:
        return text

    def save(self) -> object:
        return None


class Journal:
    def __init__(self) -> None:
        self.records: list[Mapping[str, Any]] = []

    def append(self, record: Mapping[str, Any]) -> None:
        self.records.append(record)

    async def append_async(self, record: Mapping[str, Any]) -> None:
        self.records.append(record)


async def no_regime() -> RegimeSnapshot | None:
    return None


class Rig:
    def __init__(
        self, risk: Callable[[MarketSnapshot], RiskContext], decider: Decider | None = None
    ) -> None:
        self.clock = VirtualClock(EPOCH_MS)
        self.broker = PaperBroker(self.clock)  # 10 000 USD, 15 min limit time to live
        self.market = Market(self.broker, self.clock)
        self.decider = SameBuyTwice()
        chosen: Decider = decider or self.decider
        self.journal = Journal()
        snapshots = SnapshotBuilder(
            self.clock,
            tickers=TICKERS,
            market=self.market,
            features=NoFeatures(),
            broker=self.broker,
            agent_memory=lambda: "",
            peak_prices=dict,
            regime=no_regime,
        )
        self.routine = DecisionRoutine(
            self.clock,
            EventBus(),
            build_snapshot=snapshots.build,
            decider=chosen,
            risk_context=risk,
            risk_config=RiskConfig(),
            broker=self.broker,
            gate=Gate(),
            journal=self.journal,
            store=Store(),
        )

    def buys_placed(self) -> list[str]:
        return [
            order["client_order_id"]
            for record in self.journal.records
            for order in record.get("orders", [])
            if order["side"] == "buy" and order["status"] in ("open", "filled")
        ]

    async def two_decisions_a_minute_apart(self) -> None:
        first = await self.routine.decide_once(["candle_close:ETH/USDT:15m"])
        assert "error" not in first, first
        await self.clock.advance(60.0)
        # the market moves up, away from the resting limit: it stays unfilled
        self.market.trade(ETH, low=2_201.0, high=2_206.0, close=2_204.0)
        second = await self.routine.decide_once(["candle_close:ETH/USDT:15m"])
        assert "error" not in second, second


def with_wiring(snapshot: MarketSnapshot) -> RiskContext:
    return risk_context(snapshot, TICKERS)


async def test_the_same_buy_asked_again_while_the_first_rests_places_one_order() -> None:
    rig = Rig(with_wiring)
    await rig.two_decisions_a_minute_apart()

    assert len(rig.buys_placed()) == 1
    (resting,) = rig.broker.open_orders()
    assert resting.ticker == ETH and resting.limit_price == pytest.approx(2_200.0)
    first, second = rig.decider.seen
    assert first.pending_orders == []
    (pending,) = second.pending_orders  # the decider saw it too
    assert (pending.ticker, pending.side) == (ETH, "buy")
    assert pending.notional_usd == pytest.approx(2_000.0, abs=0.01)
    assert second.open_positions == []  # nothing filled: only the order says ETH is held
    record = rig.journal.records[1]
    assert record["accepted"] == [] and "orders" in record and record["orders"] == []
    reasons = [c["reason"] for c in record["cap_changes"]]
    assert any(RESTING_BUYS_COUNT in r for r in reasons), reasons

    # once the market trades through the limit, the account holds the target, not twice it
    await rig.clock.advance(60.0)
    rig.market.trade(ETH, low=2_190.0, high=2_204.0, close=2_195.0)
    assert rig.broker.open_orders() == []
    held = rig.broker.ledger.positions[ETH].quantity * 2_195
    assert float(held) == pytest.approx(0.2 * float(rig.broker.portfolio_value_usd()), rel=0.01)


async def test_without_resting_orders_in_the_risk_context_the_bug_comes_back() -> None:
    """The scenario is the bug's: a context that ignores resting orders places two BUYs."""

    def blind(snapshot: MarketSnapshot) -> RiskContext:
        return with_wiring(snapshot.model_copy(update={"pending_orders": []}))

    rig = Rig(blind)
    await rig.two_decisions_a_minute_apart()
    assert len(rig.buys_placed()) == 2
    assert len(rig.broker.open_orders()) == 2


class BuyThenSell:
    """BUY ETH, then change its mind: SELL ETH (no position yet, only the resting limit)."""

    def __init__(self) -> None:
        self.actions = [Action.BUY, Action.SELL]

    async def decide(
        self, snapshot: MarketSnapshot, prompt: AssembledPrompt | None = None
    ) -> AgentDecision:
        action = self.actions.pop(0)
        pct = 0.2 if action is Action.BUY else 0.0
        choice = TradeDecision(ticker="ethusdt", action=action, position_pct=pct, confidence=0.7)
        return AgentDecision(decisions=(choice,), decided_by="fallback", decider_reason="test")


async def test_a_sell_cancels_the_resting_buy_so_it_cannot_buy_back_in_later() -> None:
    rig = Rig(with_wiring, BuyThenSell())
    await rig.two_decisions_a_minute_apart()

    first, second = rig.journal.records
    (placed,) = first["orders"]
    assert placed["status"] == "open"
    assert second["cancelled"] == [
        {"client_order_id": placed["client_order_id"], "ticker": ETH, "status": "cancelled"}
    ]
    assert rig.broker.open_orders() == []
    # the market later trades through the old limit: nothing is bought
    await rig.clock.advance(60.0)
    rig.market.trade(ETH, low=2_150.0, high=2_204.0, close=2_160.0)
    assert ETH not in rig.broker.ledger.positions
    assert float(rig.broker.portfolio_value_usd()) == pytest.approx(10_000.0)
