"""A retired model: the Messages API answers 404 ``not_found_error`` naming it. A config still
naming it (claude-sonnet-4-5 retires on 2026-11-30) fails over to ``failover_models`` and says so
once in the log, and is not asked again (until a restart or a config naming another model); the
404 was not a failover kind, so every decision fell back to the rules."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from fakes.claude_support import Make, answer, snapshot
from fakes.instant_clock import InstantClock
from fakes.messages_api import FakeMessagesApi, ScriptedResponse, error_response, json_message

RETIRED = "claude-sonnet-4-5"
CURRENT = "claude-sonnet-4-6"


def retired_gone(body: dict[str, Any]) -> ScriptedResponse:
    if body.get("model") == RETIRED:
        return error_response(404, "not_found_error", f"model: {RETIRED}")
    return json_message(answer())


async def test_a_retired_model_fails_over_and_is_said_once(
    api: FakeMessagesApi, make: Make, caplog: pytest.LogCaptureFixture
) -> None:
    api.responder = retired_gone
    decider = make(model=RETIRED, failover_models=(CURRENT,))
    with caplog.at_level(logging.INFO):
        first = await decider.decide(snapshot())
        second = await decider.decide(snapshot())
    assert [(a["model"], a["outcome"]) for a in first.attempts] == [
        (RETIRED, "failed"),
        (CURRENT, "ok"),
    ]
    assert first.attempts[0]["kind"] == "model_not_found"
    # the retired model is not asked before its failover at every decision: it would 404 again
    assert [(a["model"], a["outcome"]) for a in second.attempts] == [(CURRENT, "ok")]
    assert [r.body["model"] for r in api.requests] == [RETIRED, CURRENT, CURRENT]
    assert first.decided_by == second.decided_by == "claude", second.decider_reason
    said = [r for r in caplog.records if RETIRED in r.getMessage() and r.levelno >= logging.WARNING]
    assert len(said) == 1, [r.getMessage() for r in said]
    assert CURRENT in said[0].getMessage()
    assert decider.breaker.state.value == "closed"


async def test_a_404_that_names_no_model_does_not_fail_over(
    api: FakeMessagesApi, make: Make
) -> None:
    """A wrong base URL (a proxy's 404 page) is no retired model: every model would fail alike."""
    api.script(error_response(404, "not_found_error", "Not found"))
    decider = make(model=RETIRED, failover_models=(CURRENT,))
    decision = await decider.decide(snapshot())
    assert decision.decided_by != "claude"
    assert [a["kind"] for a in decision.attempts] == ["not_found"]
    assert len(api.requests) == 1


async def test_a_retired_model_with_no_failover_is_asked_once_and_said_once(
    api: FakeMessagesApi, make: Make, clock: InstantClock, caplog: pytest.LogCaptureFixture
) -> None:
    """No model is left to ask: the first 404 is the last call to it until a restart or a config
    naming another; every later decision is the rules', said once, not a call each (nor a breaker
    trial every ``open_secs``)."""
    api.responder = retired_gone
    decider = make(model=RETIRED)
    with caplog.at_level(logging.INFO):
        decisions = [await decider.decide(snapshot())]
        said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        caplog.clear()
        for _ in range(5):
            clock.advance(decider.breaker.open_secs + 1)  # past any breaker's open time
            decisions.append(await decider.decide(snapshot()))
    assert any("no failover model is left" in m for m in said), said
    assert len(api.requests) == 1
    for decision in decisions:
        assert decision.decided_by != "claude"
        assert "model_not_found" in decision.decider_reason
    assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert decider.breaker.state.value == "closed"
