"""The analysts' Claude summaries against the fake Messages API: a clean context per analyst, the
daily budget and ledger count them, an invalid answer falls back to the numbers; and the assembled
decision prompt reads its stable parts from the prompt cache on the next call."""

from __future__ import annotations

import logging
from typing import Any

import orjson
import pytest
from fakes.claude_support import API_KEY, MODEL, snapshot
from fakes.messages_api import FakeMessagesApi, ScriptedResponse, error_response, text_message
from fakes.token_counts import CacheCounter

from agent.analyst_summariser import ClaudeSummariser
from agent.budget import DailyBudget
from agent.claude import UsageLedger
from agent.claude_client import ClaudeClient, RetryPolicy, build_anthropic_client
from agent.config import AgentConfig
from agent.cost_accounting import MS_PER_DAY, CostBook
from agent.prompt_assembly import PromptAssembler
from core.backoff import Backoff
from core.clock import VirtualClock
from memory.analyst_model import AnalystReport, utc_day
from memory.analyst_summary import SummaryRequest, make_summary
from memory.context import AssembledContext, SummaryItem

T0 = 1_740_787_200_000
GOOD = (
    "**Key trends**: BTC up 3 %.\n**Key events**: breakout.\n**Risk factors**: hot funding.\n"
    "**Signal strength**: high"
)


def _reports(analyst: str) -> tuple[AnalystReport, ...]:
    return tuple(
        AnalystReport(
            report_id=f"r-{analyst}-{i}",
            analyst=analyst,
            ticker="BTC/USDT",
            day=utc_day(T0),
            at_ms=T0 + i,
            content=f"{analyst} report {i} on BTC. Price {80_000 + i * 900}.",
            confidence=0.7,
            timescale="daily",
            figures={"price": 80_000.0 + i * 900},
        )
        for i in range(4)
    )


def _summariser(
    api: FakeMessagesApi, budget_usd: float | None = 5.0
) -> tuple[ClaudeSummariser, UsageLedger]:
    config = AgentConfig(model=MODEL, base_url=api.base_url)
    clock = VirtualClock(epoch_ms=T0)
    client = ClaudeClient(
        build_anthropic_client(config, API_KEY),
        clock,
        config.pricing,
        RetryPolicy(backoff=Backoff(max_attempts=1)),
    )
    ledger = UsageLedger(DailyBudget(clock, budget_usd))
    return ClaudeSummariser(client, config, ledger), ledger


def _market_request() -> SummaryRequest:
    """The market analyst's BTC/USDT post-close summary of T0's day."""
    return SummaryRequest(
        analyst="market",
        ticker="BTC/USDT",
        day=utc_day(T0),
        session="post_close",
        reports=_reports("market"),
    )


async def test_each_analyst_call_sees_only_its_own_reports() -> None:
    async with FakeMessagesApi() as api:
        api.script(text_message(GOOD), text_message(GOOD))
        summariser, ledger = _summariser(api)
        for analyst in ("market", "derivatives"):
            request = SummaryRequest(
                analyst=analyst,
                ticker="BTC/USDT",
                day=utc_day(T0),
                session="post_close",
                reports=_reports(analyst),
            )
            summary = await make_summary(request, now_ms=T0, model=summariser)
            assert summary.path == "model" and summary.signal_strength == "high"
        first, second = (orjson.dumps(r.body).decode() for r in api.requests)
        assert "market report" in first and "derivatives report" not in first
        assert "derivatives report" in second and "market report" not in second
        assert "derivatives analyst" in second and "market analyst" not in second
        assert ledger.totals().calls == 2 and ledger.budget.spent_today_usd > 0


async def test_invalid_answer_and_spent_budget_fall_back_to_the_numbers() -> None:
    async with FakeMessagesApi() as api:
        api.script(text_message("Looks bullish to me."))
        summariser, ledger = _summariser(api, budget_usd=0.001)
        request = SummaryRequest(
            analyst="market",
            ticker="BTC/USDT",
            day=utc_day(T0),
            session="pre_open",
            reports=_reports("market"),
        )
        summary = await make_summary(request, now_ms=T0, model=summariser)
        assert summary.path == "deterministic" and "invalid_summary" in summary.detail
        assert ledger.totals().failed_calls == 1
        spent = await make_summary(request, now_ms=T0, model=summariser)  # the one call spent it
        assert spent.path == "deterministic" and "daily budget spent" in spent.detail
        assert len(api.requests) == 1


async def test_stable_parts_are_read_from_the_cache_on_the_next_call() -> None:
    counter = CacheCounter()
    ctx = AssembledContext(
        at_ms=T0,
        values={"notes": "Watch weekends.", "rubric": "Name the signals."},
        caps={"max_position_pct": 0.1},
        summaries=[
            SummaryItem(
                analyst="market", ticker="BTC/USDT", kind="pre_open", text=GOOD, made_at_ms=T0
            )
        ],
    )
    prompts = PromptAssembler(None)
    first = prompts.build(snapshot().as_sent(), ctx).request(AgentConfig())
    moved = snapshot().model_copy(update={"at_ms": T0 + 900_000})
    second = prompts.build(moved.as_sent(), ctx).request(AgentConfig())
    one, two = counter.usage_for(first), counter.usage_for(second)
    assert one["cache_read_input_tokens"] == 0 and one["cache_creation_input_tokens"] > 0
    assert two["cache_read_input_tokens"] == one["cache_creation_input_tokens"]
    assert two["cache_creation_input_tokens"] == 0


async def test_a_secret_in_a_model_summary_is_redacted() -> None:
    """A day summary is model text kept in analysts.db and sent in every later decision prompt;
    a key-shaped string in it was kept as the model wrote it (the decision's and the debate's
    model text is redacted before it is kept)."""
    leaked = "sk-ant-api03-hostileSecretValue0123456789abcdef"
    async with FakeMessagesApi() as api:
        api.script(text_message(GOOD.replace("breakout.", f"breakout, key {leaked}.")))
        summariser, _ledger = _summariser(api)
        summary = await make_summary(_market_request(), now_ms=T0, model=summariser)
    assert summary.path == "model"
    assert "hostileSecretValue" not in summary.text and "breakout, key" in summary.text


async def test_a_retired_model_s_summary_fails_over() -> None:
    """A 404 naming the configured model (retired) is asked of ``failover_models`` as a
    decision is; the summariser called the one model, so every summary fell back to the numbers."""

    def respond(body: dict[str, Any]) -> ScriptedResponse:
        if body.get("model") == "claude-sonnet-4-5":
            return error_response(404, "not_found_error", "model: claude-sonnet-4-5")
        return text_message(GOOD)

    async with FakeMessagesApi() as api:
        api.responder = respond
        config = AgentConfig(
            model="claude-sonnet-4-5", failover_models=(MODEL,), base_url=api.base_url
        )
        clock = VirtualClock(epoch_ms=T0)
        client = ClaudeClient(
            build_anthropic_client(config, API_KEY),
            clock,
            config.pricing,
            RetryPolicy(backoff=Backoff(max_attempts=1)),
        )
        summariser = ClaudeSummariser(client, config, UsageLedger(DailyBudget(clock, 5.0)))
        summary = await make_summary(_market_request(), now_ms=T0, model=summariser)
    assert summary.path == "model", summary.detail
    assert [r.body["model"] for r in api.requests] == ["claude-sonnet-4-5", MODEL]


async def test_every_summary_call_is_journaled_and_counted_in_the_cost() -> None:
    """A summary call is billed to the daily budget; without a journal line its dollars were in
    no cost figure, and a restart (whose budget starts from the journal's) spent them again."""
    lines: list[dict[str, Any]] = []
    async with FakeMessagesApi() as api:
        api.script(text_message(GOOD), text_message("Looks bullish to me."))
        config = AgentConfig(model=MODEL, base_url=api.base_url)
        clock = VirtualClock(epoch_ms=T0)
        client = ClaudeClient(
            build_anthropic_client(config, API_KEY),
            clock,
            config.pricing,
            RetryPolicy(backoff=Backoff(max_attempts=1)),
        )
        ledger = UsageLedger(DailyBudget(clock, 5.0))
        summariser = ClaudeSummariser(
            client, config, ledger, clock=clock, journal=lambda line: lines.append(dict(line))
        )
        for session in ("pre_open", "post_close"):
            request = SummaryRequest(
                analyst="market",
                ticker="BTC/USDT",
                day=utc_day(T0),
                session=session,
                reports=_reports("market"),
            )
            await make_summary(request, now_ms=T0, model=summariser)
    assert [(line["type"], line["outcome"]) for line in lines] == [
        ("summary", "ok"),
        ("summary", "failed"),
    ]
    book = CostBook()
    assert [book.add(line) for line in lines] == [None, None]
    assert book.day(T0 // MS_PER_DAY).total.cost_usd == pytest.approx(
        ledger.totals().cost_total_usd
    )


async def test_control_characters_in_a_model_summary_are_escaped_its_lines_kept() -> None:
    """A day summary is several lines by design, kept in analysts.db and sent in every later
    decision prompt: an ESC, a BEL, a NUL or a U+009B (a terminal's ESC [) in the model's text was
    kept raw, where a lesson's are written as their escapes (``state.line_text``)."""
    hostile = GOOD.replace("breakout.", "break\x1b[2Jout\x07 \x00 \x9b31m.")
    async with FakeMessagesApi() as api:
        api.script(text_message(hostile))
        summariser, _ledger = _summariser(api)
        summary = await make_summary(_market_request(), now_ms=T0, model=summariser)
    assert summary.path == "model", summary.detail
    assert not any(c in summary.text for c in "\x1b\x07\x00\x9b"), repr(summary.text)
    assert "break\\x1b[2Jout\\x07 \\x00 \\x9b31m." in summary.text
    assert summary.text.count("\n") == GOOD.count("\n")  # its lines are its lines


async def test_a_spent_budget_is_said_once_a_budget_day_not_at_each_summary(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Each analyst, ticker and session the spent budget kept from the model warned 'summary by
    the model failed: daily budget spent': up to 24 warnings at each day's roll, every day."""
    summaries = []
    async with FakeMessagesApi() as api:
        summariser, _ledger = _summariser(api, budget_usd=0.0)
        with caplog.at_level(logging.WARNING):
            for analyst in ("market", "derivatives", "sentiment"):
                for session in ("pre_open", "post_close"):
                    request = _market_request().model_copy(
                        update={"analyst": analyst, "session": session}
                    )
                    summaries.append(await make_summary(request, now_ms=T0, model=summariser))
        assert not api.requests
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warned) == 1 and warned[0].startswith("analysts: budget_spent: "), warned
    assert {s.path for s in summaries} == {"deterministic"}
    assert all("not asked: daily budget spent" in s.detail for s in summaries)
