"""The retry after an invalid answer is asked only while the day's budget, counting what the
invalid answer cost, allows it. The budget was checked once before the call: a first answer that
was not JSON and cost past the budget was followed by a second try as expensive."""

from __future__ import annotations

import pytest
from fakes.claude_support import Make, answer, snapshot
from fakes.messages_api import FakeMessagesApi, json_message, text_message, usage_body

from agent.budget import AgentPricing

#: 400k input tokens at 3 USD per million: 1.20 USD, past the 1 USD budget on its own
_BIG = usage_body(input_tokens=400_000, output_tokens=100)
_BIG_USD = AgentPricing().cost_usd(input_tokens=400_000, output_tokens=100)


async def test_an_invalid_answer_that_spent_the_budget_is_not_retried(
    api: FakeMessagesApi, make: Make
) -> None:
    api.script(text_message("not json", usage=_BIG), json_message(answer(), usage=_BIG))
    decider = make(budget_usd=1.0)
    decision = await decider.decide(snapshot())
    assert len(api.requests) == 1
    assert decision.decided_by == "fallback"
    assert decision.decider_reason.startswith("claude_failed: invalid_json")
    (attempt,) = decision.attempts
    assert "not retried: budget_spent" in attempt["detail"]
    assert decider.ledger.budget.spent_today_usd == pytest.approx(_BIG_USD)


async def test_an_invalid_answer_within_the_budget_is_retried(
    api: FakeMessagesApi, make: Make
) -> None:
    api.script(text_message("not json"), json_message(answer()))
    decision = await make(budget_usd=1.0).decide(snapshot())
    assert len(api.requests) == 2
    assert decision.decided_by == "claude"
