"""The debate decider through the real anthropic SDK against the role-aware fake Messages API."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from fakes.claude_support import AT_MS, MODEL, fallback, snapshot
from fakes.debate_support import DebateAnswers, blocks, stop_loss_exit
from fakes.instant_clock import InstantClock
from fakes.messages_api import FakeMessagesApi, json_message, overloaded, text_message

from agent.breaker import CircuitBreaker
from agent.budget import DailyBudget
from agent.claude import UsageLedger
from agent.claude_client import ClaudeClient, RetryPolicy, build_anthropic_client
from agent.config import AgentConfig
from agent.debate import DebateDecider
from agent.debate_config import DebateConfig
from agent.debate_memory import InProcessMemory
from broker.port import Action
from core.backoff import Backoff

CHEAP = "claude-haiku-4-5"


@pytest.fixture
async def api() -> AsyncIterator[FakeMessagesApi]:
    async with FakeMessagesApi() as server:
        yield server


def make(
    api: FakeMessagesApi,
    *,
    memory: InProcessMemory | None,
    debate: DebateConfig | None = None,
    failover: tuple[str, ...] = (),
    budget_usd: float | None = None,
    clock: InstantClock | None = None,
) -> DebateDecider:
    clock = clock or InstantClock(epoch_ms=AT_MS)
    config = AgentConfig(
        model=MODEL,
        base_url=api.base_url,
        timeout_secs=5.0,
        decider="debate",
        failover_models=failover,
        debate=debate or DebateConfig(),
    )
    retries = config.debate.llm_max_retries
    policy = RetryPolicy(backoff=Backoff(base_secs=0.1, cap_secs=0.2, max_attempts=retries))
    client = ClaudeClient(
        build_anthropic_client(config, "sk-ant-test-debate-0000"),
        clock,
        config,  # its price table: each role billed at its model's list price
        policy,
    )
    return DebateDecider(
        client=client,
        config=config,
        clock=clock,
        fallback=fallback(),
        breaker=CircuitBreaker(clock),
        ledger=UsageLedger(DailyBudget(clock, budget_usd)),
        memory=memory,
    )


def roles_in_order(api: FakeMessagesApi) -> list[str]:
    return [
        r.body["system"][0]["text"].split("\n", 1)[0].removeprefix("ROLE: ") for r in api.requests
    ]


async def test_rounds_run_bull_and_bear_then_trader_then_manager(api: FakeMessagesApi) -> None:
    answers = DebateAnswers()
    api.responder = answers.respond
    decider = make(api, memory=InProcessMemory())

    decision = await decider.decide(snapshot())

    order = roles_in_order(api)
    # two rounds of a concurrent pair (either order inside a pair), then trader, then manager
    assert sorted(order[0:2]) == sorted(order[2:4]) == ["bear", "bull"]
    assert order[4:] == ["trader", "manager"]
    assert decision.decided_by == "debate" and decision.decider_reason == "debated"
    record = decision.debate
    assert record is not None
    assert [(r["role"], r["round"]) for r in record["roles"]] == [
        ("bull", 1),
        ("bear", 1),
        ("bull", 2),
        ("bear", 2),
        ("trader", 0),
        ("manager", 0),
    ]
    # round 2 answers the other side's round-1 argument; round 1 had none
    first_bull, second_bull = answers.sent["bull"]
    assert first_bull["arguments"] == {"bear_last": None}
    assert second_bull["arguments"]["bear_last"]["text"].startswith("bear case")
    trader_args = answers.sent["trader"][0]["arguments"]
    assert set(trader_args) == {"bull", "bear"}
    assert set(answers.sent["manager"][0]["arguments"]) == {"bull", "bear", "trader"}
    # the cheaper model argues, the agent's model decides; costs per role at their list prices
    models = {r["role"]: r["model"] for r in record["roles"]}
    assert models == {"bull": CHEAP, "bear": CHEAP, "trader": MODEL, "manager": MODEL}
    costs = record["costs"]
    assert costs["bull"]["calls"] == 2 and costs["trader"]["calls"] == 1
    assert costs["bull"]["cost_usd"] == pytest.approx(2 * (900 * 1.0 + 120 * 5.0) / 1e6)
    assert costs["trader"]["cost_usd"] == pytest.approx((900 * 3.0 + 120 * 15.0) / 1e6)
    assert decision.usage is not None
    assert decision.usage.cost_usd == pytest.approx(sum(c["cost_usd"] for c in costs.values()))
    assert decider.totals().calls == 6
    assert decider.ledger.budget.spent_today_usd == pytest.approx(decision.usage.cost_usd)


async def test_working_memory_is_a_window_of_the_last_outputs(api: FakeMessagesApi) -> None:
    answers = DebateAnswers()
    api.responder = answers.respond
    decider = make(api, memory=InProcessMemory(), debate=DebateConfig(working_mem_max=5))

    await decider.decide(snapshot())
    items = decider.working.items()
    assert [i.role for i in items] == ["bear", "bull", "bear", "trader", "manager"]
    assert all(set(i.model_dump()) == {"content", "role", "ticker", "created_at"} for i in items)
    # the trader saw the four arguments; the manager the window's last five, trader included
    assert [w["role"] for w in answers.sent["trader"][0]["working_memory"]] == [
        "bull",
        "bear",
        "bull",
        "bear",
    ]
    assert [w["role"] for w in answers.sent["manager"][0]["working_memory"]][-1] == "trader"
    await decider.decide(snapshot())
    assert len(decider.working) == 5  # never more than working_mem_max
    # the next decision's first bull call sees the previous decision's window
    assert [w["role"] for w in answers.sent["bull"][2]["working_memory"]] == [
        "bear",
        "bull",
        "bear",
        "trader",
        "manager",
    ]


async def test_memory_off_keeps_no_window_across_decisions_and_writes_nothing(
    api: FakeMessagesApi,
) -> None:
    answers = DebateAnswers()
    api.responder = answers.respond
    decider = make(api, memory=None)
    await decider.decide(snapshot())
    decision = await decider.decide(snapshot())
    assert answers.sent["bull"][2]["working_memory"] == []
    assert all(sent["memories"] == [] for sent in answers.sent["trader"])
    assert decision.debate is not None and decision.debate["memory_writes"] == {"memory": "off"}


@pytest.mark.parametrize("manager_only", [False, True])
async def test_write_policy(api: FakeMessagesApi, manager_only: bool) -> None:
    api.responder = DebateAnswers().respond
    memory = InProcessMemory()
    decider = make(api, memory=memory, debate=DebateConfig(memory_store_manager_only=manager_only))
    decision = await decider.decide(snapshot())
    roles = [e.role for e in memory.entries]
    if manager_only:
        assert roles == ["manager"]
    else:  # identical texts of round 1 and 2 are one memory (exact duplicates are not rewritten)
        assert set(roles) == {"bull", "bear", "trader", "manager"}
    assert decision.debate is not None
    # bull and bear of two rounds and the trader: five outputs the policy keeps out, or none
    assert decision.debate["memory_writes"]["skipped_policy"] == (5 if manager_only else 0)


async def test_every_rollup_count_manager_reports_become_one_rollup(api: FakeMessagesApi) -> None:
    answers = DebateAnswers()
    api.responder = answers.respond
    memory = InProcessMemory()
    decider = make(
        api, memory=memory, debate=DebateConfig(memory_store_manager_only=True, rollup_count=2)
    )
    for n in range(4):
        answers.script(
            "manager",
            json_message(
                {
                    "risks": f"risk number {n}",
                    "strategy": f"plan {n}",
                    "next_steps": [],
                    "size_reductions": [],
                }
            ),
        )
        await decider.decide(snapshot())
    kinds = [e.kind for e in memory.entries]
    assert kinds == ["debate", "debate", "rollup", "debate", "debate", "rollup"]
    rollups = [e for e in memory.entries if e.kind == "rollup"]
    assert rollups[0].text.startswith("Roll-up of 2 manager reports: Risks: risk number 0")
    assert "risk number 1" in rollups[0].text and "risk number 2" in rollups[1].text


async def test_memories_are_retrieved_per_role_with_scores(api: FakeMessagesApi) -> None:
    answers = DebateAnswers()
    api.responder = answers.respond
    decider = make(api, memory=InProcessMemory())
    await decider.decide(snapshot())
    decision = await decider.decide(snapshot())
    assert decision.debate is not None
    manager = next(r for r in decision.debate["roles"] if r["role"] == "manager")
    assert manager["memories"], "the second decision retrieves what the first wrote"
    assert {"sim", "role_weight", "age_days", "salience", "score"} <= set(manager["memories"][0])
    assert manager["memories"][0]["role_weight"] == 1.5  # the manager's own weight
    assert decision.debate["memories_used"] > 0


async def test_a_bull_that_fails_answers_its_stub_and_the_debate_goes_on(
    api: FakeMessagesApi,
) -> None:
    answers = DebateAnswers()
    answers.script("bull", text_message("not json"), text_message("still not json"))
    api.responder = answers.respond
    decider = make(api, memory=InProcessMemory())
    decision = await decider.decide(snapshot())
    assert decision.decided_by == "debate"
    assert decision.debate is not None and decision.debate["fell_back"] == ["bull"]
    bull = decision.debate["roles"][0]
    assert bull["output"] == {"summary": "stub bull view", "risks": []}
    assert bull["reason"] == "invalid_json" and bull["tries"] == 2  # llm_max_retries
    assert decision.debate["memory_writes"]["skipped_fallback"] == 1  # a stub is no memory


@pytest.mark.parametrize("role", ["trader", "manager"])
async def test_a_trader_or_manager_that_falls_back_hands_over_to_the_rules(
    api: FakeMessagesApi, role: Any
) -> None:
    answers = DebateAnswers()
    answers.script(role, text_message("{}"), text_message("{}"))
    api.responder = answers.respond
    decider = make(api, memory=InProcessMemory())
    decision = await decider.decide(snapshot())
    assert decision.decided_by == "fallback"
    assert decision.decider_reason == f"debate_failed: {role} (schema_mismatch) fell back"
    assert decision.debate is not None and decision.debate["fell_back"] == [role]
    assert decision.usage is not None and decision.usage.cost_usd > 0  # the calls still cost
    assert decider.breaker.consecutive_failures == 1


async def test_the_failover_chain_moves_to_the_secondary_model_on_overload(
    api: FakeMessagesApi,
) -> None:
    answers = DebateAnswers()
    answers.script("trader", overloaded(), overloaded())  # both tries of the primary
    api.responder = answers.respond
    decider = make(api, memory=None, failover=("claude-opus-4-6",))
    decision = await decider.decide(snapshot())
    assert decision.decided_by == "debate"
    assert decision.debate is not None
    trader = next(r for r in decision.debate["roles"] if r["role"] == "trader")
    assert [(a["model"], a["outcome"], a["kind"]) for a in trader["attempts"]] == [
        (MODEL, "failed", "overloaded"),
        (MODEL, "failed", "overloaded"),
        ("claude-opus-4-6", "ok", ""),
    ]
    # billed at the secondary's list price; the breaker saw one successful debate
    assert trader["cost_usd"] == pytest.approx((900 * 5.0 + 120 * 25.0) / 1e6)
    assert decider.breaker.consecutive_failures == 0


async def test_a_reflection_runs_after_an_exit_and_is_written_with_high_salience(
    api: FakeMessagesApi,
) -> None:
    answers = DebateAnswers()
    api.responder = answers.respond
    memory = InProcessMemory()
    decider = make(api, memory=memory, debate=DebateConfig(memory_reflection_role_weight=0.95))
    decider.on_position_exit(stop_loss_exit())
    decision = await decider.decide(snapshot())
    assert answers.calls["reflection"] == 1
    assert blocks(api.requests[0].body)["trade"]["exit_reason"] == "stop_loss"
    (lesson,) = [e for e in memory.entries if e.kind == "reflection"]
    assert lesson.salience == 0.95 and lesson.ticker == "BTC/USDT"
    assert decision.debate is not None and decision.debate["reflections"][0]["written"] == 1
    await decider.decide(snapshot())
    assert answers.calls["reflection"] == 1  # once per exit, not per decision


async def test_the_manager_only_reduces_sizes(api: FakeMessagesApi) -> None:
    answers = DebateAnswers(buy_pct=0.15)
    api.responder = answers.respond
    memory = InProcessMemory()
    decider = make(api, memory=memory)
    await decider.decide(snapshot())  # the first decision holds: no memories yet
    answers.script(
        "manager",
        json_message(
            {
                "risks": "r",
                "strategy": "s",
                "next_steps": [],
                "size_reductions": [
                    {"ticker": "BTC/USDT", "position_pct": 0.05},
                    {"ticker": "ETH/USDT", "position_pct": 0.9},
                    {"ticker": "SOL/USDT", "position_pct": 0.0},
                ],
            }
        ),
    )
    decision = await decider.decide(snapshot())
    sizes = {d.ticker: (d.action, d.position_pct) for d in decision.decisions}
    assert sizes == {
        "BTC/USDT": (Action.BUY, 0.05),
        "ETH/USDT": (Action.BUY, 0.15),  # a raise is ignored
        "SOL/USDT": (Action.HOLD, 0.0),  # 0 cancels the BUY
    }
    assert decision.debate is not None
    assert any("raise" in n["reason"] for n in decision.debate["notes"])


async def test_no_role_is_asked_once_the_debate_spent_the_day_s_budget(
    api: FakeMessagesApi,
) -> None:
    """The budget was checked once, before the debate: a debate that spent it in its first round
    still asked every later role (a second round, the trader, the manager) on top of it."""
    answers = DebateAnswers()
    api.responder = answers.respond
    decider = make(api, memory=InProcessMemory(), budget_usd=0.001)  # one bull call: $0.0015
    decision = await decider.decide(snapshot())
    await decider.aclose()
    assert sorted(roles_in_order(api)) == ["bear", "bull"]
    assert decision.decided_by == "fallback"
    assert decision.decider_reason.startswith("budget_spent: ")
    assert decider.breaker.state.value == "closed"  # the budget is no failure of Claude's
    status = decider.status()
    assert status["calls"] == 2 and status["failed_calls"] == 0
    assert decision.usage is not None
    assert decision.usage.cost_usd == pytest.approx(decider.ledger.budget.spent_today_usd)


async def test_exits_the_budget_kept_from_reflection_wait_for_the_next_day(
    api: FakeMessagesApi,
) -> None:
    answers = DebateAnswers()
    api.responder = answers.respond
    clock = InstantClock(epoch_ms=AT_MS)
    memory = InProcessMemory()
    decider = make(api, memory=memory, budget_usd=0.001, clock=clock)  # one reflection: $0.0015
    first, second = stop_loss_exit(), stop_loss_exit().model_copy(update={"ticker": "ETH/USDT"})
    decider.on_position_exit(first)
    decider.on_position_exit(second)
    decision = await decider.decide(snapshot())
    assert roles_in_order(api) == ["reflection"]
    assert decision.decider_reason.startswith("budget_spent: ")
    clock.advance(86_400)  # a new UTC day, a new budget
    await decider.decide(snapshot().model_copy(update={"at_ms": AT_MS + 86_400_000}))
    await decider.aclose()
    reflected = [blocks(r.body)["trade"]["ticker"] for r in api.requests[1:2]]
    assert reflected == ["ETH/USDT"]
    assert sorted(e.ticker or "" for e in memory.entries if e.kind == "reflection") == [
        "BTC/USDT",
        "ETH/USDT",
    ]


async def test_a_spent_budget_is_said_once_a_day_not_for_each_role_at_each_decision(
    api: FakeMessagesApi, caplog: pytest.LogCaptureFixture
) -> None:
    """Each role not asked for the spent budget logged 'fell back (budget_spent)': six warnings
    a decision until the day ended. It is said once a budget day, when it is first met."""
    answers = DebateAnswers()
    api.responder = answers.respond
    clock = InstantClock(epoch_ms=AT_MS)
    decider = make(api, memory=InProcessMemory(), budget_usd=0.001, clock=clock)
    with caplog.at_level(logging.WARNING, logger="agent.debate"):
        for _ in range(3):
            await decider.decide(snapshot())
        said_today = _budget_said(caplog)
        clock.advance(86_400)  # a new UTC day: the budget is spent again, and said again
        for _ in range(2):
            await decider.decide(snapshot().model_copy(update={"at_ms": AT_MS + 86_400_000}))
    await decider.aclose()
    assert len(said_today) == 1, said_today
    assert len(_budget_said(caplog)) == 2


def _budget_said(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "agent.debate" and "budget_spent" in r.getMessage()
    ]
