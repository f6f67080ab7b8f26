"""Wake conditions in Claude's answer are checked against the daemon's own tickers and its
``gate.max_wake_conditions``, through the composition root (``build_agents``) and the real SDK on
the fake Messages API. The answer's check used the default tickers and a cap of 10: a daemon
trading DOGE lost every DOGE condition before its gate saw it, and a cap of 12 kept 10."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes.claude_support import answer, snapshot
from fakes.debate_support import DebateAnswers
from fakes.instant_clock import InstantClock
from fakes.messages_api import FakeMessagesApi, json_message

from agent.claude import ClaudeDecider
from agent.debate import DebateDecider
from agent.materiality import DeltaConfig
from agent.tiers import TierConfig
from core.bus import EventBus
from gate.gate import GateConfig
from market.closes import CloseSeries
from runner.agent_wiring import build_agents
from runner.config import MarketConfig, Settings
from runner.context_wiring import build_decision_context

TICKERS = ("DOGE/USDT", "BTC/USDT")


def settings(api: FakeMessagesApi, tmp_path: Path, cap: int, decider: str = "claude") -> Settings:
    base = Settings(state_dir=tmp_path / "state", anthropic_api_key="sk-ant-api03-test-111")
    agent = base.agent.model_copy(
        update={
            "decider": decider,
            "base_url": api.base_url,
            "tiers": TierConfig(routine_model=None),
            "delta": DeltaConfig(enabled=False),
        }
    )
    return base.model_copy(
        update={
            "agent": agent,
            "market": MarketConfig(tickers=TICKERS),
            "gate": GateConfig(max_wake_conditions=cap),
        }
    )


def no_history(_ticker: str) -> CloseSeries:
    return CloseSeries((), None)


def condition(metric: str, threshold: float) -> dict[str, object]:
    return {"metric": metric, "operator": "gt", "threshold": threshold, "reason": "r"}


@pytest.mark.parametrize("cap", [12, 3])
async def test_wake_conditions_are_checked_against_the_configured_tickers_and_cap(
    api: FakeMessagesApi,
    clock: InstantClock,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    cap: int,
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY_FILE", raising=False)
    wake = [
        condition("eth_price", 2000.0),  # a default ticker this daemon does not trade
        *(condition("doge_price", 0.1 + i / 100) for i in range(12)),
    ]
    api.script(json_message(answer(wake_conditions=wake)))
    agents = build_agents(
        settings(api, tmp_path, cap),
        clock,
        EventBus(),
        no_history,
        lambda _r: None,
    )
    assert isinstance(agents.decider, ClaudeDecider)
    try:
        decision = await agents.decider.decide(snapshot())
    finally:
        await agents.decider.aclose()
    assert decision.decided_by == "claude"
    assert [c["metric"] for c in decision.wake_conditions] == ["doge_price"] * cap
    notes = decision.attempts[-1]["notes"]
    rejected = [n["reason"] for n in notes if n["what"] == "wake_condition"]
    assert "unknown metric 'eth_price'" in rejected[0]
    assert len(rejected) == 1 + 12 - cap


async def test_the_debate_trader_s_wake_conditions_are_checked_against_the_configured_ones(
    api: FakeMessagesApi, clock: InstantClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY_FILE", raising=False)
    wake = [condition("eth_price", 2000.0), *(condition("doge_price", 0.1 + i) for i in range(5))]
    answers = DebateAnswers()
    trader = {
        "decisions": [],
        "rationale": "r",
        "confidence": 0.5,
        "next_check_seconds": 900,
        "wake_conditions": wake,
    }
    answers.script("trader", json_message(trader))
    api.responder = answers.respond
    agents = build_agents(
        settings(api, tmp_path, 3, decider="debate"),
        clock,
        EventBus(),
        no_history,
        lambda _r: None,
    )
    assert isinstance(agents.decider, DebateDecider)
    try:
        decision = await agents.decider.decide(snapshot())
    finally:
        await agents.decider.aclose()
    assert decision.decided_by == "debate"
    assert [c["metric"] for c in decision.wake_conditions] == ["doge_price"] * 3


def _system_text(body: dict[str, object]) -> str:
    system = body["system"]
    assert isinstance(system, list)
    return str(system[0]["text"])


async def test_the_prompt_names_the_configured_tickers_metrics_and_cap(
    api: FakeMessagesApi, clock: InstantClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The system prompt listed the default tickers' metrics: a DOGE daemon was never told of
    doge_price, then had eth_price refused. Two calls send the very same system prompt (cache)."""
    monkeypatch.delenv("ANTHROPIC_API_KEY_FILE", raising=False)
    api.script(json_message(answer()), json_message(answer()))
    agents = build_agents(
        settings(api, tmp_path, 3), clock, EventBus(), no_history, lambda _r: None
    )
    context = build_decision_context(
        settings(api, tmp_path, 3), clock, agents, memory=False, person_notes=lambda: ""
    )
    assert context is not None
    try:
        await agents.decider.decide(snapshot())
        await agents.decider.decide(snapshot(), await context.prompts.assemble(snapshot()))
    finally:
        await agents.decider.aclose()
    first, second = (_system_text(r.body) for r in api.requests)
    assert first == second
    assert "doge_price (" in first and "doge_funding_rate (" in first
    assert "eth_price" not in first and "sol_funding" not in first
    assert "at most 3 wake conditions" in first.lower()
    assert "eth_price" not in str(api.requests[0].body["output_config"])


async def test_the_debate_trader_s_prompt_names_the_configured_tickers_metrics(
    api: FakeMessagesApi, clock: InstantClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY_FILE", raising=False)
    answers = DebateAnswers()
    api.responder = answers.respond
    agents = build_agents(
        settings(api, tmp_path, 3, decider="debate"), clock, EventBus(), no_history, lambda _r: None
    )
    try:
        await agents.decider.decide(snapshot())
    finally:
        await agents.decider.aclose()
    trader = [
        _system_text(r.body)
        for r in api.requests
        if _system_text(r.body).startswith("ROLE: trader")
    ]
    assert trader
    assert "doge_price (" in trader[0] and "eth_price" not in trader[0]
    assert "at most 3" in trader[0]
