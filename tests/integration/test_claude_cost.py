"""Spending where it matters, through the real SDK against the fake Messages API: a quiet routine
pass after an answer makes no call (``decided_by: unchanged``), routine passes go to the routine
model, and a routine answer that would enter a position is asked again of the strong model."""

from __future__ import annotations

from fakes.claude_support import API_KEY, MODEL, answer, fallback, snapshot
from fakes.instant_clock import InstantClock
from fakes.messages_api import FakeMessagesApi, json_message

from agent.breaker import CircuitBreaker
from agent.budget import DailyBudget
from agent.claude import ClaudeDecider, UsageLedger
from agent.claude_client import ClaudeClient, build_anthropic_client
from agent.config import AgentConfig
from agent.materiality import DeltaConfig
from agent.tiers import TierConfig

ROUTINE = "claude-haiku-4-5"
HOLD = answer(
    decisions=[{"ticker": "BTC/USDT", "action": "HOLD", "position_pct": 0.0, "reasoning": "-"}]
)


def decider(
    api: FakeMessagesApi, clock: InstantClock, budget_usd: float | None = None, **config: object
) -> ClaudeDecider:
    agent = AgentConfig(model=MODEL, base_url=api.base_url, timeout_secs=5.0, **config)
    client = ClaudeClient(build_anthropic_client(agent, API_KEY), clock, agent)
    return ClaudeDecider(
        client=client,
        config=agent,
        clock=clock,
        fallback=fallback(),
        breaker=CircuitBreaker(clock),
        ledger=UsageLedger(DailyBudget(clock, budget_usd)),
    )


async def test_a_quiet_routine_pass_after_an_answer_is_decided_without_a_call() -> None:
    clock = InstantClock()
    async with FakeMessagesApi(realistic_usage=True) as api:
        api.script(json_message(HOLD), json_message(HOLD))
        claude = decider(api, clock, tiers=TierConfig(routine_model=None))
        first = await claude.decide(snapshot())
        later = snapshot().model_copy(update={"at_ms": snapshot().at_ms + 15 * 60_000})
        second = await claude.decide(later)
        loud = later.model_copy(update={"gate_wake_reasons": ["anomaly:BTC/USDT:z=2.50"]})
        third = await claude.decide(loud)
        await claude.aclose()
    assert (first.decided_by, second.decided_by, third.decided_by) == (
        "claude",
        "unchanged",
        "claude",
    )
    assert second.usage is None and second.decisions == ()
    assert second.wake_conditions == first.wake_conditions
    assert len(api.requests) == 2
    assert claude.status()["unchanged_decisions"] == 1


async def test_routine_passes_use_the_routine_model_and_entries_are_asked_of_the_strong_one() -> (
    None
):
    clock = InstantClock()
    async with FakeMessagesApi(realistic_usage=True) as api:
        api.script(json_message(HOLD), json_message(answer()), json_message(HOLD))
        claude = decider(
            api,
            clock,
            tiers=TierConfig(routine_model=ROUTINE),
            delta=DeltaConfig(enabled=False),
        )
        routine = await claude.decide(snapshot())
        entry = await claude.decide(snapshot())  # the routine model says BUY: asked again
        await claude.aclose()
    assert [r.body["model"] for r in api.requests] == [ROUTINE, ROUTINE, MODEL]
    assert routine.usage is not None and routine.usage.model == ROUTINE
    assert entry.usage is not None and entry.usage.model == f"{ROUTINE}+{MODEL}"
    assert entry.decisions == routine.decisions  # the strong model's answer (no BUY) is used
    assert len(entry.attempts) == 2
    # billed at each model's own price: the routine one is cheaper per token
    haiku, sonnet = (AgentConfig().for_model(m) for m in (ROUTINE, MODEL))
    assert haiku.input_per_mtok_usd < sonnet.input_per_mtok_usd


async def test_an_entry_is_not_asked_again_once_the_routine_call_spent_the_budget() -> None:
    clock = InstantClock()
    async with FakeMessagesApi() as api:
        api.script(json_message(answer()), json_message(HOLD))
        claude = decider(
            api,
            clock,
            budget_usd=0.001,  # the routine call's 1200 in / 300 out cost $0.0027 at haiku prices
            tiers=TierConfig(routine_model=ROUTINE),
            delta=DeltaConfig(enabled=False),
        )
        decision = await claude.decide(snapshot())  # the routine model says BUY
        await claude.aclose()
    assert [r.body["model"] for r in api.requests] == [ROUTINE]
    assert decision.decided_by == "fallback"
    assert decision.decider_reason.startswith("budget_spent: ")
    # the routine call was billed all the same, to the decision and to the day
    assert decision.usage is not None and decision.usage.model == ROUTINE
    assert decision.usage.cost_usd > 0.001
    assert claude.ledger.budget.spent_today_usd == decision.usage.cost_usd
    assert claude.status()["calls"] == 1 and claude.status()["failed_calls"] == 0
    assert len(decision.attempts) == 1
