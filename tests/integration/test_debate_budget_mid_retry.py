"""A debate role whose answer was invalid and whose retry the day's budget refused: it warned
'fell back (invalid_json)' on its own, beside the spent budget said once (bull and bear of one
round: three warnings where one was meant), and a reflection kept from its retry that way was
lost, where one the budget kept from being asked waits for the next budget day. The budget is
now said once a budget day in either case, and such a reflection waits too."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pytest
from fakes.claude_support import AT_MS, snapshot
from fakes.debate_support import DebateAnswers, stop_loss_exit
from fakes.instant_clock import InstantClock
from fakes.messages_api import FakeMessagesApi, text_message, usage_body
from test_debate_decider import make

from agent.debate_memory import InProcessMemory

#: a first try billed past the day's $0.001 budget (a cheap role's 900 in + 120 out: $0.0015)
_INVALID = text_message("not json", usage=usage_body(input_tokens=900, output_tokens=120))


@pytest.fixture
async def api() -> AsyncIterator[FakeMessagesApi]:
    async with FakeMessagesApi() as server:
        yield server


def _debate_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "agent.debate"]


async def test_roles_whose_retry_the_budget_refused_say_the_budget_once(
    api: FakeMessagesApi, caplog: pytest.LogCaptureFixture
) -> None:
    answers = DebateAnswers()
    answers.script("bull", _INVALID)
    answers.script("bear", _INVALID)
    api.responder = answers.respond
    decider = make(api, memory=InProcessMemory(), budget_usd=0.001)
    with caplog.at_level(logging.WARNING, logger="agent.debate"):
        decision = await decider.decide(snapshot())
        await decider.decide(snapshot())  # the same budget day: nothing more to say
    await decider.aclose()
    said = _debate_warnings(caplog)
    assert len(said) == 1 and said[0].startswith("debate: budget_spent: "), said
    assert answers.calls["bull"] == answers.calls["bear"] == 1  # neither retry went out
    assert decision.debate is not None
    bull = decision.debate["roles"][0]
    assert bull["reason"] == "invalid_json" and "not retried: budget_spent" in str(bull["attempts"])
    assert decision.usage is not None and decision.usage.cost_usd > 0.001  # both tries billed


async def test_a_reflection_whose_retry_the_budget_refused_waits_for_the_next_day(
    api: FakeMessagesApi, caplog: pytest.LogCaptureFixture
) -> None:
    answers = DebateAnswers()
    answers.script("reflection", _INVALID)
    api.responder = answers.respond
    clock = InstantClock(epoch_ms=AT_MS)
    memory = InProcessMemory()
    decider = make(api, memory=memory, budget_usd=0.001, clock=clock)
    decider.on_position_exit(stop_loss_exit())
    with caplog.at_level(logging.WARNING, logger="agent.debate"):
        first = await decider.decide(snapshot())
    said = _debate_warnings(caplog)
    assert len(said) == 1 and said[0].startswith("debate: budget_spent: "), said
    assert first.usage is not None and first.usage.cost_usd > 0.001  # the try is billed
    clock.advance(86_400)  # a new UTC day, a new budget: the exit is reflected on
    await decider.decide(snapshot().model_copy(update={"at_ms": AT_MS + 86_400_000}))
    await decider.aclose()
    assert answers.calls["reflection"] == 2
    assert [e.ticker for e in memory.entries if e.kind == "reflection"] == ["BTC/USDT"]
