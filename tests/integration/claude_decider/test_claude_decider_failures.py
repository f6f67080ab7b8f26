"""ClaudeDecider through the real anthropic SDK against the fake Messages API on loopback: failed
calls (refusals, timeouts, overload, retry-after, server errors, non-messages), the breaker, the
daily budget and the API key; each ends in the fallback with its reason."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from fakes.claude_support import (
    EVERY_PASS_ONE_MODEL,
    MODEL,
    Make,
    answer,
    fallback,
    snapshot,
)
from fakes.instant_clock import InstantClock
from fakes.messages_api import (
    FakeMessagesApi,
    ScriptedResponse,
    error_response,
    json_message,
    overloaded,
    rate_limited,
)

from agent.breaker import CircuitBreaker
from agent.budget import AgentPricing, DailyBudget
from agent.claude import ClaudeDecider, UsageLedger
from agent.claude_client import ClaudeClient, Credentials, build_anthropic_client
from agent.config import AgentConfig
from runner.agent_wiring import anthropic_key_reader


@pytest.mark.parametrize(
    ("stop_reason", "kind"), [("refusal", "refusal"), ("max_tokens", "max_tokens")]
)
async def test_refusal_or_max_tokens_fails_at_once_without_retry(
    api: FakeMessagesApi, clock: InstantClock, make: Make, stop_reason: str, kind: str
) -> None:
    api.script(json_message(answer(), stop_reason=stop_reason))
    decision = await make().decide(snapshot())
    assert decision.decided_by == "fallback"
    assert decision.decider_reason == f"claude_failed: {kind}"
    assert len(api.requests) == 1
    assert decision.attempts[0]["stop_reason"] == stop_reason


async def test_a_slow_answer_past_the_timeout_fails(
    api: FakeMessagesApi, clock: InstantClock, make: Make
) -> None:
    slow = ScriptedResponse(body=json_message(answer()).body, delay_secs=30.0)
    api.script(slow, slow)
    decision = await make(timeout_secs=0.2).decide(snapshot())
    assert decision.decided_by == "fallback"
    assert [a["kind"] for a in decision.attempts] == ["timeout", "timeout"]


async def test_529_storm_fails_after_bounded_tries_and_opens_the_breaker(
    api: FakeMessagesApi, clock: InstantClock, make: Make
) -> None:
    api.script(*[overloaded() for _ in range(6)])
    decider = make()
    reasons = [(await decider.decide(snapshot())).decider_reason for _ in range(4)]

    assert len(api.requests) == 6  # 3 calls x 2 tries; the 4th never left
    assert reasons[0] == "claude_failed: overloaded"
    assert "breaker open" in reasons[2]
    assert reasons[3].startswith("breaker_open")
    assert all(0 < s <= 8.0 for s in clock.slept_secs)  # jittered backoff, capped


async def test_a_short_retry_after_is_honoured_then_the_call_succeeds(
    api: FakeMessagesApi, clock: InstantClock, make: Make
) -> None:
    api.script(rate_limited(3), json_message(answer()))
    decision = await make().decide(snapshot())
    assert decision.decided_by == "claude"
    assert clock.slept_secs == [3.0]
    assert [a["outcome"] for a in decision.attempts] == ["failed", "ok"]


async def test_a_long_retry_after_is_not_waited_out(
    api: FakeMessagesApi, clock: InstantClock, make: Make
) -> None:
    api.script(rate_limited(90))
    decision = await make().decide(snapshot())
    assert decision.decided_by == "fallback"
    assert decision.decider_reason == "claude_failed: rate_limited"
    assert clock.slept_secs == [] and len(api.requests) == 1
    assert "not waiting" in decision.attempts[0]["detail"]


async def test_a_500_then_success_recovers(
    api: FakeMessagesApi, clock: InstantClock, make: Make
) -> None:
    api.script(error_response(500, "api_error"), json_message(answer()))
    decision = await make().decide(snapshot())
    assert decision.decided_by == "claude"
    assert decision.attempts[0]["kind"] == "server_error"


async def test_breaker_half_open_trial_closes_it_again(
    api: FakeMessagesApi, clock: InstantClock, make: Make
) -> None:
    api.script(*[overloaded() for _ in range(6)], json_message(answer()))
    decider = make()
    for _ in range(3):
        await decider.decide(snapshot())
    clock.advance(900)
    trial = await decider.decide(snapshot())
    assert trial.decided_by == "claude"
    assert trial.decider_reason == "answered (breaker trial)"
    assert [t.to_state for t in decider.breaker.transitions] == ["open", "half_open", "closed"]
    status = decider.status()
    assert status["breaker"] == "closed" and status["failed_calls"] == 3
    assert [t["to_state"] for t in status["breaker_transitions"]] == ["open", "half_open", "closed"]


async def test_no_api_key_means_fallback_with_the_reason_and_no_request(
    api: FakeMessagesApi, clock: InstantClock, make: Make
) -> None:
    decider = make(api_key=None)
    decision = await decider.decide(snapshot())
    assert (decision.decided_by, decision.decider_reason) == ("fallback", "no_api_key")
    assert not decider.enabled and api.requests == []
    assert decider.status()["disabled_reason"] == "no_api_key"


async def test_daily_budget_spent_sends_decisions_to_the_fallback_until_next_utc_day(
    api: FakeMessagesApi, clock: InstantClock, make: Make
) -> None:
    api.script(json_message(answer()), json_message(answer()))
    decider = make(budget_usd=0.001)
    first = await decider.decide(snapshot())  # costs 0.0081 USD: over the budget afterwards
    second = await decider.decide(snapshot())
    assert first.decided_by == "claude"
    assert second.decided_by == "fallback" and second.decider_reason.startswith("budget_spent")
    assert "2025-04-08T00:00:00+00:00" in second.decider_reason
    clock.advance(86_400)
    assert (await decider.decide(snapshot())).decided_by == "claude"
    assert len(api.requests) == 2


@pytest.mark.parametrize(
    "body", [b"<html>gateway says hi</html>", b'{"hello": "world"}'], ids=["html", "other-json"]
)
async def test_a_200_that_is_not_a_message_is_a_failure_not_a_crash(
    api: FakeMessagesApi, clock: InstantClock, make: Make, body: bytes
) -> None:
    garbage = ScriptedResponse(status=200, body=body)
    api.script(garbage, garbage)
    decision = await make().decide(snapshot())
    assert decision.decided_by == "fallback"
    assert decision.decider_reason == "claude_failed: bad_response"
    assert [a["kind"] for a in decision.attempts] == ["bad_response", "bad_response"]


async def test_a_cancelled_trial_call_frees_the_half_open_slot(
    api: FakeMessagesApi, clock: InstantClock, make: Make
) -> None:
    api.script(*[overloaded() for _ in range(6)])
    decider = make()
    for _ in range(3):
        await decider.decide(snapshot())
    clock.advance(900)
    api.script(ScriptedResponse(body=json_message(answer()).body, delay_secs=30.0))
    task = asyncio.create_task(decider.decide(snapshot()))
    while len(api.requests) < 7:  # wait until the trial request has reached the server
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert decider.breaker.allow()  # the next call may try again


async def test_a_key_rotated_while_the_breaker_is_open_is_read_at_the_trial(
    api: FakeMessagesApi,
    clock: InstantClock,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    key_file = tmp_path / "anthropic_api_key"
    key_file.write_text("sk-ant-old-key-revoked-000\n")
    monkeypatch.setenv("ANTHROPIC_API_KEY_FILE", str(key_file))
    api.accepted_keys = {"sk-ant-new-key-rotated-111"}
    config = AgentConfig(
        model=MODEL, base_url=api.base_url, timeout_secs=5.0, **EVERY_PASS_ONE_MODEL
    )
    read_key = anthropic_key_reader("sk-ant-old-key-revoked-000")
    client = ClaudeClient(
        build_anthropic_client(config, "sk-ant-old-key-revoked-000"),
        clock,
        AgentPricing(),
        credentials=Credentials(read_key, lambda key: build_anthropic_client(config, key)),
    )
    breaker = CircuitBreaker(clock)
    decider = ClaudeDecider(
        client=client,
        config=config,
        clock=clock,
        fallback=fallback(),
        breaker=breaker,
        ledger=UsageLedger(DailyBudget(clock, None)),
    )
    try:
        for _ in range(3):  # 401: not retried, three failed decisions open the breaker
            assert (await decider.decide(snapshot())).decided_by == "fallback"
        assert breaker.state.value == "open" and len(api.requests) == 3

        key_file.write_text("sk-ant-new-key-rotated-111\n")  # a person rotates the key
        clock.advance(breaker.open_secs)
        api.script(json_message(answer()))
        trial = await decider.decide(snapshot())
    finally:
        await decider.aclose()

    assert (trial.decided_by, trial.decider_reason) == ("claude", "answered (breaker trial)")
    sent = api.requests[-1].headers
    assert (sent.get("x-api-key") or sent["authorization"]).endswith("sk-ant-new-key-rotated-111")
    assert breaker.state.value == "closed"


async def test_an_answer_trickled_past_the_timeout_fails_though_every_read_gets_bytes(
    api: FakeMessagesApi, clock: InstantClock, make: Make
) -> None:
    # ~1.5 KB at 64 bytes per 0.1 s: several seconds in all, each read well within 0.3 s
    trickled = ScriptedResponse(body=json_message(answer()).body, trickle_secs=0.1)
    api.script(trickled, trickled)
    decision = await make(timeout_secs=0.3).decide(snapshot())
    assert decision.decided_by == "fallback"
    assert decision.decider_reason == "claude_failed: timeout"
    assert [a["kind"] for a in decision.attempts] == ["timeout", "timeout"]
