"""Decision routine with fakes: single-flight coalescing, caps before the broker, one journal line
per run (also on failure), gate and memory updates."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from fakes.brokers import IdleBroker

from agent.decision import AgentDecision, TradeDecision
from agent.prompt_assembly import AssembledPrompt
from agent.risk import RiskConfig, RiskContext
from agent.routine import DecisionRoutine
from agent.snapshot import MarketSnapshot, sent_digest
from broker.port import Action, OpenOrder, OrderIntent, OrderResult
from core.bus import EventBus
from core.clock import VirtualClock
from core.events import DecisionMade, Topic

TICKERS = ("BTC/USDT", "ETH/USDT", "SOL/USDT")


def _snapshot(reasons: Sequence[str], at_ms: int = 1_000) -> MarketSnapshot:
    return MarketSnapshot(
        at_ms=at_ms,
        tickers={},
        btc_price=90_000.0,
        btc_change_1h_pct=None,
        btc_change_24h_pct=None,
        regime=None,
        exposure_scale=1.0,
        open_positions=[],
        portfolio_value=10_000.0,
        cash=10_000.0,
        gate_wake_reasons=list(reasons),
        unavailable={"regime": "test"},
    )


class FakeDecider:
    def __init__(self, answer: AgentDecision) -> None:
        self.answer = answer
        self.seen: list[MarketSnapshot] = []
        self.release = asyncio.Event()
        self.release.set()
        self.started = asyncio.Event()

    async def decide(
        self, snapshot: MarketSnapshot, prompt: AssembledPrompt | None = None
    ) -> AgentDecision:
        self.seen.append(snapshot)
        self.started.set()
        await self.release.wait()
        return self.answer


class FakeBroker(IdleBroker):
    """Records what it was sent and answers every order as open."""

    def __init__(self) -> None:
        self.executed: list[OrderIntent] = []

    async def execute_decisions(self, intents: Sequence[OrderIntent]) -> Sequence[OrderResult]:
        self.executed.extend(intents)
        return [
            OrderResult(
                client_order_id=f"c-{i.ticker}",
                ticker=i.ticker,
                side="buy" if i.action is Action.BUY else "sell",
                status="open",
                requested_notional_usd=i.notional_usd,
            )
            for i in intents
        ]


class FakeGate:
    def __init__(self) -> None:
        self.updates: list[tuple[float, Sequence[Mapping[str, Any]]]] = []

    def update_from_agent(
        self, next_check_seconds: float, wake_conditions: Sequence[Mapping[str, Any]]
    ) -> dict[str, Any]:
        self.updates.append((next_check_seconds, wake_conditions))
        return {"next_check_seconds": min(max(next_check_seconds, 60), 3600)}


class FakeStore:
    def __init__(self) -> None:
        self.memory = ""
        self.saves = 0

    def set_agent_memory(self, text: str) -> str:
        self.memory = text[:500]
        return self.memory

    def save(self) -> object:
        self.saves += 1
        return ()


class Rig:
    def __init__(
        self,
        answer: AgentDecision,
        *,
        snapshot_error: Exception | None = None,
        broker: FakeBroker | None = None,
    ) -> None:
        self.clock = VirtualClock(epoch_ms=1_735_689_600_000)
        self.bus = EventBus()
        self.decider = FakeDecider(answer)
        self.broker = broker or FakeBroker()
        self.gate = FakeGate()
        self.store = FakeStore()
        self.journal: list[Mapping[str, Any]] = []
        self.snapshots = 0
        self.made: list[DecisionMade] = []
        self.bus.subscribe(Topic.DECISION_MADE, self.made.append)  # type: ignore[arg-type]

        async def build(reasons: Sequence[str], *, decision_id: str = "") -> MarketSnapshot:
            self.snapshots += 1
            if snapshot_error is not None:
                raise snapshot_error
            return _snapshot(reasons, self.clock.now_ms())

        def risk(snapshot: MarketSnapshot) -> RiskContext:
            return RiskContext(
                whitelist=TICKERS,
                portfolio_value_usd=10_000.0,
                cash_usd=10_000.0,
                prices={"BTC/USDT": 90_000.0, "ETH/USDT": 3_000.0, "SOL/USDT": 150.0},
            )

        class _J:
            def append(_self, record: Mapping[str, Any]) -> None:
                self.journal.append(record)

            async def append_async(_self, record: Mapping[str, Any]) -> None:
                self.journal.append(record)

        self.routine = DecisionRoutine(
            self.clock,
            self.bus,
            build_snapshot=build,
            decider=self.decider,
            risk_context=risk,
            risk_config=RiskConfig(),
            broker=self.broker,
            gate=self.gate,
            journal=_J(),
            store=self.store,
        )


ANSWER = AgentDecision(
    decisions=(
        TradeDecision(
            ticker="SOL/USDT:USDT", action=Action.BUY, position_pct=5.0 / 5, confidence=0.7
        ),
        TradeDecision(ticker="DOGE/USDT", action=Action.BUY, position_pct=0.1),
        TradeDecision(ticker="BTC/USDT", action=Action.HOLD),
    ),
    next_check_seconds=10**9,
    wake_conditions=(
        {"metric": "btc_price", "operator": "lt", "threshold": 80_000, "reason": "dip"},
    ),
    memory_update="SOL looked strong. Keep an eye on it.",
    decided_by="fallback",
    decider_reason="no_api_key",
)


async def test_one_run_caps_executes_updates_gate_and_journals() -> None:
    rig = Rig(ANSWER)
    record = await rig.routine.decide_once(["candle_close:BTC/USDT:1h"])

    (intent,) = rig.broker.executed
    assert intent.ticker == "SOL/USDT" and intent.notional_usd == pytest.approx(2_000.0)
    assert rig.gate.updates == [(10**9, ANSWER.wake_conditions)]
    assert rig.store.memory == ANSWER.memory_update and rig.store.saves == 1

    (line,) = rig.journal
    assert line == record
    assert line["trigger"] == ["candle_close:BTC/USDT:1h"]
    assert line["decided_by"] == "fallback" and line["decider_reason"] == "no_api_key"
    assert len(line["snapshot_digest"]) == 16
    # the journal keeps the snapshot exactly as the decider was sent it, and its digest is of that
    sent = _snapshot(["candle_close:BTC/USDT:1h"], line["at_ms"])
    assert line["snapshot"] == sent.as_sent()
    assert line["snapshot_digest"] == sent.digest() == sent_digest(line["snapshot"])
    assert line["raw_decision"]["decisions"][0]["position_pct"] == 1.0
    assert [a["ticker"] for a in line["accepted"]] == ["SOL/USDT"]
    assert {c["what"] for c in line["cap_changes"]} >= {"ticker", "position_pct", "dropped"}
    assert line["orders"][0]["status"] == "open"
    assert line["gate_update"] == {"next_check_seconds": 3600}
    assert "error" not in line
    assert [m.decision_id for m in rig.made] == [line["decision_id"]]


async def test_requests_during_a_decision_are_coalesced_into_one_next_run() -> None:
    rig = Rig(AgentDecision(decided_by="fallback"))
    rig.decider.release.clear()
    task = asyncio.create_task(rig.routine.run())
    rig.routine.request(["candle_close:BTC/USDT:15m"])
    await rig.decider.started.wait()
    for reason in ("candle_close:ETH/USDT:15m", "candle_close:SOL/USDT:15m", "agent_timer"):
        rig.routine.request([reason])
    rig.routine.request(["agent_timer"])  # the same reason twice counts once
    assert rig.routine.pending_reasons == (
        "candle_close:ETH/USDT:15m",
        "candle_close:SOL/USDT:15m",
        "agent_timer",
    )
    rig.decider.release.set()
    while len(rig.journal) < 2:
        await asyncio.sleep(0)
    assert [line["trigger"] for line in rig.journal] == [
        ["candle_close:BTC/USDT:15m"],
        ["candle_close:ETH/USDT:15m", "candle_close:SOL/USDT:15m", "agent_timer"],
    ]
    # ETH opened the pending run; SOL, agent_timer and its repeat were merged into it
    assert rig.snapshots == 2 and rig.routine.coalesced == 3
    task.cancel()


async def test_a_failing_run_is_journaled_and_the_loop_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    rig = Rig(ANSWER, snapshot_error=RuntimeError("history cache empty"))
    task = asyncio.create_task(rig.routine.run())
    rig.routine.request(["watchdog_no_market_data"])
    while not rig.journal:
        await asyncio.sleep(0)
    assert rig.journal[0]["error"] == "RuntimeError: history cache empty"
    assert rig.broker.executed == [] and rig.routine.failures == 1
    assert any("failed" in r.getMessage() and r.exc_info for r in caplog.records)
    rig.routine.request(["agent_timer"])
    while len(rig.journal) < 2:
        await asyncio.sleep(0)
    assert rig.journal[1]["trigger"] == ["agent_timer"]
    task.cancel()


async def test_intents_the_tracker_refuses_are_skipped_and_journaled() -> None:
    rig = Rig(ANSWER)
    refused: list[str] = []

    def no_buys(intents: Sequence[OrderIntent]) -> list[OrderIntent]:
        refused.extend(i.ticker for i in intents if i.action is Action.BUY)
        return [i for i in intents if i.action is not Action.BUY]

    rig.routine._before_execution = no_buys
    record = await rig.routine.decide_once(["agent_timer"])
    assert refused == ["SOL/USDT"] and rig.broker.executed == []
    assert record["skipped"] == [
        {"ticker": "SOL/USDT", "action": "BUY", "reason": "position not tracked"}
    ]
    assert record["orders"] == []


class BrokerThatCannotList(FakeBroker):
    async def get_open_orders(self) -> Sequence[OpenOrder]:
        raise ConnectionError("exchange unreachable")


async def test_a_sell_whose_resting_buys_cannot_be_listed_says_so_and_goes_on() -> None:
    sell = TradeDecision(ticker="ETH/USDT", action=Action.SELL, position_pct=0.0, confidence=0.6)
    rig = Rig(AgentDecision(decisions=(sell,), decided_by="fallback", decider_reason="no_api_key"))
    rig.broker = BrokerThatCannotList()
    rig.routine._broker = rig.broker
    record = await rig.routine.decide_once(["agent_timer"])
    assert record["cancelled"] == [
        {"tickers": ["ETH/USDT"], "error": "ConnectionError: exchange unreachable"}
    ]
    assert "error" not in record  # the decision itself completed and was journaled
