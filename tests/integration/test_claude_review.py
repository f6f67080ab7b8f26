"""ClaudePositionReviewer through the real SDK against the fake Messages API."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest
from fakes.claude_support import API_KEY, AT_MS, EVERY_PASS_ONE_MODEL, MODEL
from fakes.instant_clock import InstantClock
from fakes.messages_api import (
    FakeMessagesApi,
    error_response,
    json_message,
    overloaded,
    text_message,
    usage_body,
)

from agent.breaker import CircuitBreaker
from agent.budget import AgentPricing, DailyBudget
from agent.claude import UsageLedger
from agent.claude_client import ClaudeClient, build_anthropic_client
from agent.claude_review import ClaudePositionReviewer, ClaudeUnavailable
from agent.config import AgentConfig
from core.bus import EventBus
from core.events import AgentFailure, Topic
from tracker.ports import PositionReview, ReviewAction


def _position(ticker: str) -> PositionReview:
    return PositionReview(
        ticker=ticker,
        entry_price=100.0,
        mark_price=104.0,
        pnl_pct=4.0,
        peak_pnl_pct=5.0,
        holding_secs=3600.0,
        regime_at_entry="medium_volatility",
        regime_now="high_volatility",
        entry_signals={"momentum": 1.0},
    )


@pytest.fixture
async def reviewer() -> AsyncIterator[tuple[FakeMessagesApi, ClaudePositionReviewer]]:
    async with FakeMessagesApi() as api:
        clock = InstantClock(AT_MS)
        config = AgentConfig(
            model=MODEL, base_url=api.base_url, timeout_secs=5.0, **EVERY_PASS_ONE_MODEL
        )
        client = ClaudeClient(build_anthropic_client(config, API_KEY), clock, AgentPricing())
        yield (
            api,
            ClaudePositionReviewer(
                client=client,
                config=config,
                clock=clock,
                breaker=CircuitBreaker(clock),
                ledger=UsageLedger(DailyBudget(clock, None)),
            ),
        )
        await client.aclose()


async def test_verdicts_are_validated_per_position(
    reviewer: tuple[FakeMessagesApi, ClaudePositionReviewer],
) -> None:
    api, claude = reviewer
    reviews = [
        {"ticker": "SOL/USDT:USDT", "action": "EXIT", "reason": "regime turned"},
        {"ticker": "ETH/USDT", "action": "ADD", "reason": "not held: dropped"},
        {"ticker": "BTC/USDT", "action": "SELL_ALL", "reason": "unknown action: dropped"},
    ]
    api.script(json_message({"reviews": reviews}))
    verdicts = await claude.review([_position("SOL/USDT"), _position("BTC/USDT")], {"x": 1})

    assert [(v.ticker, v.action, v.decided_by) for v in verdicts] == [
        ("SOL/USDT", ReviewAction.EXIT, "claude")
    ]
    body = api.requests[0].body
    assert body["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert "<positions>" in body["messages"][0]["content"]
    assert claude.ledger.totals().calls == 1


async def test_failures_raise_unavailable_and_share_the_breaker(
    reviewer: tuple[FakeMessagesApi, ClaudePositionReviewer],
) -> None:
    api, claude = reviewer
    api.script(*[overloaded() for _ in range(6)])
    reasons = []
    for _ in range(4):
        with pytest.raises(ClaudeUnavailable) as caught:
            await claude.review([_position("SOL/USDT")], {})
        reasons.append(str(caught.value))
    assert reasons[0] == "claude_failed: overloaded"
    assert reasons[3].startswith("breaker_open")
    assert len(api.requests) == 6


async def test_a_bad_answer_is_a_failure(
    reviewer: tuple[FakeMessagesApi, ClaudePositionReviewer],
) -> None:
    api, claude = reviewer
    api.script(json_message({"verdicts": []}), json_message({"verdicts": []}))
    with pytest.raises(ClaudeUnavailable, match="schema_mismatch"):
        await claude.review([_position("SOL/USDT")], {})


async def test_every_review_call_is_journaled_with_its_usage() -> None:
    lines: list[Mapping[str, Any]] = []
    async with FakeMessagesApi() as api:
        clock = InstantClock(AT_MS)
        config = AgentConfig(
            model=MODEL, base_url=api.base_url, timeout_secs=5.0, **EVERY_PASS_ONE_MODEL
        )
        client = ClaudeClient(build_anthropic_client(config, API_KEY), clock, AgentPricing())
        ledger = UsageLedger(DailyBudget(clock, None))
        claude = ClaudePositionReviewer(
            client=client,
            config=config,
            clock=clock,
            breaker=CircuitBreaker(clock),
            ledger=ledger,
            journal=lines.append,
        )
        reviews = [{"ticker": "SOL/USDT", "action": "HOLD", "reason": "trend intact"}]
        api.script(json_message({"reviews": reviews}), overloaded(), overloaded())
        await claude.review([_position("SOL/USDT")], {})
        with pytest.raises(ClaudeUnavailable):
            await claude.review([_position("SOL/USDT")], {})
        await client.aclose()

    answered, failed = lines
    assert answered["type"] == failed["type"] == "review"
    assert answered["decided_by"] == "claude" and answered["tickers"] == ["SOL/USDT"]
    assert failed["decided_by"] == "fallback" and failed["verdicts"] == []
    totals = ledger.totals()
    journaled = [line["usage"] for line in lines if line["usage"] is not None]
    assert sum(u["input_tokens"] for u in journaled) == totals.input_tokens
    assert sum(u["cost_usd"] for u in journaled) == pytest.approx(totals.cost_total_usd)


async def test_a_trial_review_that_ends_in_a_bad_usage_block_reopens_the_breaker(
    reviewer: tuple[FakeMessagesApi, ClaudePositionReviewer],
) -> None:
    api, claude = reviewer
    for _ in range(3):
        claude.breaker.record_failure("overloaded")
    claude._clock.advance(claude.breaker.open_secs)  # type: ignore[attr-defined]
    bad_usage = {**usage_body(), "input_tokens": "lots"}
    verdicts = [{"ticker": "BTC/USDT", "action": "HOLD", "reason": "fine"}]
    api.script(json_message({"reviews": verdicts}, usage=bad_usage))

    with pytest.raises(ClaudeUnavailable):
        await claude.review([_position("BTC/USDT")], {})

    assert claude.breaker.state.value == "open"
    assert claude.breaker.reopens_in_secs() == claude.breaker.open_secs


async def test_a_review_kept_without_a_call_is_journaled_with_what_it_saw() -> None:
    """A review where one position moved and one did not: the kept one gets its own
    ``unchanged`` line carrying the position and context (so it can be re-asked offline);
    before, a mixed review journaled only the asked position."""
    lines: list[Mapping[str, Any]] = []
    async with FakeMessagesApi() as api:
        clock = InstantClock(AT_MS)
        config = AgentConfig(model=MODEL, base_url=api.base_url, timeout_secs=5.0)
        client = ClaudeClient(build_anthropic_client(config, API_KEY), clock, AgentPricing())
        claude = ClaudePositionReviewer(
            client=client,
            config=config,
            clock=clock,
            breaker=CircuitBreaker(clock),
            ledger=UsageLedger(DailyBudget(clock, None)),
            journal=lines.append,
        )
        hold = [
            {"ticker": t, "action": "HOLD", "reason": "trend intact"}
            for t in ("SOL/USDT", "BTC/USDT")
        ]
        api.script(json_message({"reviews": hold}), json_message({"reviews": hold[1:]}))
        await claude.review([_position("SOL/USDT"), _position("BTC/USDT")], {"cash_usd": 1.0})
        moved = _position("BTC/USDT").model_copy(update={"mark_price": 110.0, "pnl_pct": 10.0})
        verdicts = await claude.review([_position("SOL/USDT"), moved], {"cash_usd": 2.0})
        await client.aclose()

    assert sorted(v.ticker for v in verdicts) == ["BTC/USDT", "SOL/USDT"]
    first, kept, asked = lines
    assert first["tickers"] == ["SOL/USDT", "BTC/USDT"] and len(first["positions"]) == 2
    assert kept["decided_by"] == "unchanged" and kept["usage"] is None
    assert kept["positions"] == [_position("SOL/USDT").model_dump(mode="json")]
    assert kept["context"] == {"cash_usd": 2.0}
    assert asked["decided_by"] == "claude" and asked["tickers"] == ["BTC/USDT"]
    assert asked["positions"][0]["mark_price"] == 110.0


async def test_a_half_open_review_of_unchanged_positions_leaves_the_trial_to_the_next_call() -> (
    None
):
    """A review that needs no call (every position kept by delta gating) while the breaker is
    half-open took the trial slot and never gave it back: every later call, the decider's too,
    was refused with 'breaker_open: next trial in 0 s' until a restart."""
    async with FakeMessagesApi() as api:
        clock = InstantClock(AT_MS)
        config = AgentConfig(model=MODEL, base_url=api.base_url, timeout_secs=5.0)
        client = ClaudeClient(build_anthropic_client(config, API_KEY), clock, AgentPricing())
        claude = ClaudePositionReviewer(
            client=client,
            config=config,
            clock=clock,
            breaker=CircuitBreaker(clock),
            ledger=UsageLedger(DailyBudget(clock, None)),
        )
        hold = [{"ticker": "SOL/USDT", "action": "HOLD", "reason": "trend intact"}]
        api.script(json_message({"reviews": hold}), *[overloaded() for _ in range(6)])
        await claude.review([_position("SOL/USDT")], {})  # SOL/USDT reviewed: kept from now on
        both = [_position("SOL/USDT"), _position("BTC/USDT")]
        for _ in range(3):  # three failed reviews of the new position open the breaker
            with pytest.raises(ClaudeUnavailable):
                await claude.review(both, {})
        clock.advance(claude.breaker.open_secs)

        kept = await claude.review([_position("SOL/USDT")], {})
        btc = [{"ticker": "BTC/USDT", "action": "HOLD", "reason": "fine"}]
        api.script(json_message({"reviews": btc}))
        trial = await claude.review(both, {})
        await client.aclose()

    assert [v.decided_by for v in kept] == ["unchanged"]
    assert [(v.ticker, v.decided_by) for v in trial] == [
        ("BTC/USDT", "claude"),
        ("SOL/USDT", "unchanged"),
    ]
    assert claude.breaker.state.value == "closed"


@pytest.mark.parametrize(
    "broken",
    [
        pytest.param({"ticker": "BTC/USDT", "action": "HOLD", "reason": "x" * 501}, id="long"),
        pytest.param({"ticker": "BTC/USDT", "action": "HOLD"}, id="no-reason"),
        pytest.param({"ticker": "BTC/USDT", "action": 3, "reason": "r"}, id="action-number"),
        pytest.param({"ticker": "BTC/USDT", "action": "HOLD", "reason": "r", "x": 1}, id="extra"),
        pytest.param("BTC/USDT HOLD", id="not-an-object"),
    ],
)
async def test_one_broken_review_is_dropped_not_every_position_s(
    reviewer: tuple[FakeMessagesApi, ClaudePositionReviewer], broken: object
) -> None:
    """One review the schema refuses failed the whole answer: asked again, then every position
    went to the fallback score and the breaker counted a failure. Now that review is dropped, as
    an unknown action is, and the tracker's fallback covers its position alone."""
    api, claude = reviewer
    good = {"ticker": "SOL/USDT", "action": "EXIT", "reason": "regime turned"}
    api.script(json_message({"reviews": [broken, good]}))
    verdicts = await claude.review([_position("SOL/USDT"), _position("BTC/USDT")], {"x": 1})
    assert [(v.ticker, v.action) for v in verdicts] == [("SOL/USDT", ReviewAction.EXIT)]
    assert len(api.requests) == 1
    assert claude.breaker.consecutive_failures == 0


@pytest.mark.parametrize("answered", [True, False], ids=["then-answered", "failed"])
async def test_a_secret_in_a_review_answer_that_is_not_json_stays_out_of_the_tries(
    answered: bool,
) -> None:
    """A try's detail quotes the start of an answer that is not JSON: model text, journaled with
    the review line and published as ``agent.failure``; it went out as the model wrote it."""
    leaked = "sk-ant-api03-hostileSecretValue0123456789abcdef is the key"
    hold = {"reviews": [{"ticker": "SOL/USDT", "action": "HOLD", "reason": "fine"}]}
    lines: list[Mapping[str, Any]] = []
    failures: list[AgentFailure] = []
    bus = EventBus()
    bus.subscribe(Topic.AGENT_FAILURE, failures.append, name="test")  # type: ignore[arg-type]
    async with FakeMessagesApi() as api:
        api.script(text_message(leaked), json_message(hold) if answered else text_message(leaked))
        clock = InstantClock(AT_MS)
        config = AgentConfig(
            model=MODEL, base_url=api.base_url, timeout_secs=5.0, **EVERY_PASS_ONE_MODEL
        )
        client = ClaudeClient(build_anthropic_client(config, API_KEY), clock, AgentPricing())
        claude = ClaudePositionReviewer(
            client=client,
            config=config,
            clock=clock,
            breaker=CircuitBreaker(clock),
            ledger=UsageLedger(DailyBudget(clock, None)),
            bus=bus,
            journal=lines.append,
        )
        try:
            await claude.review([_position("SOL/USDT")], {})
        except ClaudeUnavailable:
            assert not answered
        await client.aclose()
    (line,) = lines
    details = [a["detail"] for a in line["attempts"]] + [f.detail for f in failures]
    assert len(details) == (2 if answered else 4)
    assert not any("hostileSecretValue" in d for d in details), details


async def test_a_secret_in_a_review_s_reason_is_redacted() -> None:
    """A verdict's reason is model text: the tracker acts on it and the review line journals it;
    a key-shaped string in it went out as the model wrote it."""
    lines: list[Mapping[str, Any]] = []
    leaked = "exit: sk-ant-api03-hostileSecretValue0123456789abcdef"
    async with FakeMessagesApi() as api:
        api.script(
            json_message({"reviews": [{"ticker": "SOL/USDT", "action": "EXIT", "reason": leaked}]})
        )
        clock = InstantClock(AT_MS)
        config = AgentConfig(
            model=MODEL, base_url=api.base_url, timeout_secs=5.0, **EVERY_PASS_ONE_MODEL
        )
        client = ClaudeClient(build_anthropic_client(config, API_KEY), clock, AgentPricing())
        claude = ClaudePositionReviewer(
            client=client,
            config=config,
            clock=clock,
            breaker=CircuitBreaker(clock),
            ledger=UsageLedger(DailyBudget(clock, None)),
            journal=lines.append,
        )
        (verdict,) = await claude.review([_position("SOL/USDT")], {})
        await client.aclose()
    assert verdict.action is ReviewAction.EXIT
    assert "hostileSecretValue" not in verdict.reason and verdict.reason.startswith("exit: ")
    assert "hostileSecretValue" not in str(lines[0]["verdicts"])


async def test_an_invalid_review_answer_that_spent_the_budget_is_not_retried() -> None:
    big = usage_body(input_tokens=400_000, output_tokens=100)  # 1.20 USD: past 1 USD alone
    hold = {"reviews": [{"ticker": "SOL/USDT", "action": "HOLD", "reason": "fine"}]}
    async with FakeMessagesApi() as api:
        api.script(text_message("not json", usage=big), json_message(hold, usage=big))
        clock = InstantClock(AT_MS)
        config = AgentConfig(
            model=MODEL, base_url=api.base_url, timeout_secs=5.0, **EVERY_PASS_ONE_MODEL
        )
        client = ClaudeClient(build_anthropic_client(config, API_KEY), clock, AgentPricing())
        ledger = UsageLedger(DailyBudget(clock, 1.0))
        claude = ClaudePositionReviewer(
            client=client, config=config, clock=clock, breaker=CircuitBreaker(clock), ledger=ledger
        )
        with pytest.raises(ClaudeUnavailable, match="invalid_json"):
            await claude.review([_position("SOL/USDT")], {})
        await client.aclose()
    assert len(api.requests) == 1
    assert ledger.budget.spent_today_usd == pytest.approx(1.2015)


async def test_a_position_the_answer_left_out_is_asked_again() -> None:
    """Delta gating kept a position "unchanged since Claude's review" though the answer had no
    valid review of it (left out, or dropped as malformed): the next reviews made no call for it
    and HOLD was its verdict, without Claude's or the fallback score's judgement, for 30 min."""
    lines: list[Mapping[str, Any]] = []
    answered = {"reviews": [{"ticker": "BTC/USDT", "action": "HOLD", "reason": "fine"}]}
    both = {
        "reviews": [
            {"ticker": t, "action": "HOLD", "reason": "fine"} for t in ("SOL/USDT", "BTC/USDT")
        ]
    }
    async with FakeMessagesApi() as api:
        api.script(json_message(answered), json_message(both))
        clock = InstantClock(AT_MS)
        config = AgentConfig(model=MODEL, base_url=api.base_url, timeout_secs=5.0)
        client = ClaudeClient(build_anthropic_client(config, API_KEY), clock, AgentPricing())
        claude = ClaudePositionReviewer(
            client=client,
            config=config,
            clock=clock,
            breaker=CircuitBreaker(clock),
            ledger=UsageLedger(DailyBudget(clock, None)),
            journal=lines.append,
        )
        positions = [_position("SOL/USDT"), _position("BTC/USDT")]
        first = await claude.review(positions, {})
        second = await claude.review(positions, {})
        await client.aclose()
    assert [v.ticker for v in first] == ["BTC/USDT"]
    assert {(v.ticker, v.decided_by) for v in second} == {
        ("SOL/USDT", "claude"),
        ("BTC/USDT", "unchanged"),
    }
    assert len(api.requests) == 2


async def test_a_retired_model_is_asked_once_not_at_every_review(
    reviewer: tuple[FakeMessagesApi, ClaudePositionReviewer],
) -> None:
    """With no failover model, a 404 naming the model is its last call: later reviews go to the
    rules without a call, and the breaker the decider shares is not opened by calls never made."""
    api, claude = reviewer
    api.script(*[error_response(404, "not_found_error", f"model: {MODEL}") for _ in range(6)])
    for _ in range(5):
        with pytest.raises(ClaudeUnavailable, match="model_not_found"):
            await claude.review([_position("BTC/USDT")], {"x": 1})
    assert len(api.requests) == 1
    assert claude.ledger.totals().calls == 1
    assert claude.breaker.state.value == "closed"
