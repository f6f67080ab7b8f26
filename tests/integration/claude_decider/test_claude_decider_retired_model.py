"""A retired model: the Messages API answers 404 ``not_found_error`` naming it. A config still
naming it (claude-sonnet-4-5 retires on 2026-11-30) fails over to ``failover_models`` and says so
once in the log; the 404 was not a failover kind, so every decision fell back to the rules."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from fakes.claude_support import Make, answer, snapshot
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
    for decision in (first, second):
        assert decision.decided_by == "claude", decision.decider_reason
        assert [(a["model"], a["outcome"]) for a in decision.attempts] == [
            (RETIRED, "failed"),
            (CURRENT, "ok"),
        ]
        assert decision.attempts[0]["kind"] == "model_not_found"
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
