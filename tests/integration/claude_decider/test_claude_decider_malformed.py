"""A 200 Messages API answer whose usage is plausible but whose content or stop_reason is not of
the API's shape (a proxy, a broken gateway, an SDK built without strict validation hands it over
as is): a ``bad_response`` failure that keeps the billed usage, never an unexpected error that
drops it. A body the SDK cannot parse at all is a ``bad_response`` too."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fakes.claude_support import Make, answer, snapshot
from fakes.instant_clock import InstantClock
from fakes.messages_api import (
    FakeMessagesApi,
    ScriptedResponse,
    json_message,
    text_message,
    usage_body,
)

from agent.budget import AgentPricing
from core.bus import EventBus
from core.events import AgentFailure, Topic

_TEXT = json.dumps(answer())
_BILLED = AgentPricing().cost_usd(input_tokens=1200, output_tokens=300)  # usage_body()


def _message(content: Any, stop_reason: Any = "end_turn") -> ScriptedResponse:
    body = {
        "id": "msg_malformed",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": usage_body(),
    }
    return ScriptedResponse(body=json.dumps(body).encode())


MALFORMED = {
    "content-a-string": _message(_TEXT),
    "content-an-object": _message({"type": "text", "text": _TEXT}),
    "content-a-number": _message(5),
    "block-null": _message([None]),
    "block-a-string": _message(["hello"]),
    "text-missing": _message([{"type": "text"}]),
    "text-a-number": _message([{"type": "text", "text": 5}]),
    "text-a-list": _message([{"type": "text", "text": [_TEXT]}]),
    "stop-reason-a-number": _message([{"type": "text", "text": _TEXT}], stop_reason=7),
    "stop-reason-a-list": _message([{"type": "text", "text": _TEXT}], stop_reason=["end"]),
}
#: JSON the stdlib parser (the SDK's) gives up on with a RecursionError, not a ValueError
_DEEP = b'{"a":' + b"[" * 100_000 + b"]" * 100_000 + b"}"


@pytest.mark.parametrize("response", MALFORMED.values(), ids=MALFORMED.keys())
async def test_a_malformed_message_is_a_bad_response_whose_tokens_are_billed(
    api: FakeMessagesApi, clock: InstantClock, make: Make, response: ScriptedResponse
) -> None:
    api.script(response, response)
    decider = make(budget_usd=5.0)

    decision = await decider.decide(snapshot())

    assert decision.decided_by == "fallback"
    assert decision.decider_reason == "claude_failed: bad_response"
    assert [a["kind"] for a in decision.attempts] == ["bad_response", "bad_response"]
    assert all(a["usage"]["cost_usd"] == pytest.approx(_BILLED) for a in decision.attempts)
    status = decider.status()
    assert status["cost_total_usd"] == pytest.approx(2 * _BILLED)
    assert status["cost_today_usd"] == pytest.approx(2 * _BILLED)
    assert status["failed_calls"] == 1 and decider.breaker.consecutive_failures == 1


async def test_a_200_nested_past_the_recursion_limit_is_a_bad_response(
    api: FakeMessagesApi, clock: InstantClock, make: Make
) -> None:
    api.script(ScriptedResponse(body=_DEEP), ScriptedResponse(body=_DEEP))
    decision = await make().decide(snapshot())
    assert decision.decider_reason == "claude_failed: bad_response"
    assert [a["kind"] for a in decision.attempts] == ["bad_response", "bad_response"]


@pytest.mark.parametrize("answered", [True, False], ids=["then-answered", "failed"])
async def test_a_secret_in_an_answer_that_is_not_json_stays_out_of_the_tries(
    api: FakeMessagesApi, make: Make, answered: bool
) -> None:
    """A try's detail quotes the start of an answer that is not JSON: model text, journaled with
    the decision and published as ``agent.failure`` (the notifier's webhooks), without the
    redaction every other model text passes."""
    leaked = "sk-ant-api03-hostileSecretValue0123456789abcdef is the key"
    api.script(text_message(leaked), json_message(answer()) if answered else text_message(leaked))
    failures: list[AgentFailure] = []
    bus = EventBus()
    bus.subscribe(Topic.AGENT_FAILURE, failures.append, name="test")  # type: ignore[arg-type]
    decision = await make(bus=bus).decide(snapshot())
    assert decision.decided_by == ("claude" if answered else "fallback")
    assert len(failures) == (0 if answered else 2)
    details = [a["detail"] for a in decision.attempts] + [f.detail for f in failures]
    assert details and not any("hostileSecretValue" in d for d in details)


@pytest.mark.parametrize("depth", [600, 1000])
async def test_a_ticker_nested_deep_drops_that_decision_only(
    api: FakeMessagesApi, make: Make, caplog: pytest.LogCaptureFixture, depth: int
) -> None:
    """A decision whose ticker is a list nested as deep as the JSON parser allows: its label was
    made with ``str()``, a RecursionError out of the answer's check, so the whole answer was an
    ``unexpected_error`` with a traceback in the log, the other decisions lost with it."""
    text = json.dumps(answer()).replace('"BTC/USDT"', "[" * depth + "]" * depth, 1)
    api.script(text_message(text))
    decision = await make().decide(snapshot())
    assert decision.decided_by == "claude", decision.decider_reason
    assert [d.ticker for d in decision.decisions] == ["ETH/USDT"]
    notes = decision.attempts[-1]["notes"]
    assert any(n["what"] == "decision" and n["reason"].startswith("dropped") for n in notes)
    assert not any(r.exc_info for r in caplog.records)


async def test_a_secret_in_a_wake_condition_s_reason_is_redacted(
    api: FakeMessagesApi, make: Make
) -> None:
    """A wake condition's reason is model text: kept by the gate, journaled, named in the wake
    reason and sent in the next prompt; a rejected one is quoted in a note. A key-shaped string
    in either went out as the model wrote it, past the redaction the answer's other text passes."""
    leaked = "sk-ant-api03-hostileSecretValue0123456789abcdef"
    wake = [
        {"metric": "btc_price", "operator": "lt", "threshold": 1.0, "reason": f"key {leaked}"},
        {"metric": "no_such", "operator": "lt", "threshold": 1.0, "reason": f"key {leaked}"},
    ]
    api.script(json_message(answer(wake_conditions=wake)))
    decision = await make().decide(snapshot())
    assert decision.decided_by == "claude"
    (kept,) = decision.wake_conditions
    assert kept["reason"].startswith("key ")
    assert "hostileSecretValue" not in json.dumps([decision.wake_conditions, decision.attempts])
