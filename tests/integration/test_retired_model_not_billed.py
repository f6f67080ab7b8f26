"""A retired model (404 ``model_not_found`` earlier) is not asked again: ``ModelGone``, no call
went out. The decider and the position reviewer neither billed nor counted it; the debate's roles,
the reflector and the summariser counted each as a failed call (the running totals, the status),
the reflector journaled a failed reflection, and the debate told the breaker the trader failed:
three debates later Claude was switched off for ``open_secs`` over calls that never went out."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from fakes.claude_support import API_KEY, snapshot
from fakes.memory_support import T0, open_and_exit
from fakes.messages_api import FakeMessagesApi, ScriptedResponse, error_response
from test_debate_decider import make

from agent.analyst_summariser import ClaudeSummariser
from agent.budget import AgentPricing, DailyBudget
from agent.claude import UsageLedger
from agent.claude_client import ClaudeClient, RetryPolicy, build_anthropic_client
from agent.claude_reflector import ClaudeReflector
from agent.config import AgentConfig
from core.backoff import Backoff
from core.clock import VirtualClock
from memory.analyst_model import AnalystReport, utc_day
from memory.analyst_summary import SummaryRequest, make_summary
from memory.config import MemoryConfig
from memory.embeddings import HashedNgramEmbedder
from memory.outbox import MemoryOutbox
from memory.sqlite_store import SqliteMemoryStore
from memory.writeback import MemoryWriter

RETIRED = "claude-sonnet-4-5"


def gone(body: dict[str, Any]) -> ScriptedResponse:
    return error_response(404, "not_found_error", f"model: {body.get('model')}")


def _client(config: AgentConfig, clock: VirtualClock) -> ClaudeClient:
    return ClaudeClient(
        build_anthropic_client(config, API_KEY),
        clock,
        AgentPricing(),
        RetryPolicy(backoff=Backoff(max_attempts=1)),
    )


async def test_a_debate_with_a_retired_model_neither_bills_nor_trips_the_breaker() -> None:
    async with FakeMessagesApi() as api:
        api.responder = gone
        decider = make(api, memory=None)
        runs = decider.breaker.failure_threshold + 1  # enough failures to open it, were they one
        decisions = [await decider.decide(snapshot()) for _ in range(runs)]
        sent = len(api.requests)
        await decider.aclose()
    # the first debate asked the roles' two models once each (bull and bear together, then the
    # trader), and each 404ed; nothing went out after them
    assert sent == 3
    totals = decider.ledger.totals()
    assert (totals.calls, totals.failed_calls) == (3, 3)
    # the trader's one 404 that went out is one failure; the debates after it asked nobody
    assert decider.breaker.state.value == "closed" and decider.breaker.consecutive_failures == 1
    assert decider.status()["breaker"] == "closed"
    for decision in decisions:
        assert decision.decided_by == "fallback"
        assert "model_not_found" in decision.decider_reason
    for decision in decisions[1:]:
        assert "not asked" in decision.decider_reason, decision.decider_reason


async def test_a_reflection_with_a_retired_model_is_not_counted_as_a_failed_call(
    tmp_path: Path,
) -> None:
    journal: list[dict[str, Any]] = []
    clock = VirtualClock(T0)
    config = AgentConfig(model=RETIRED, base_url="", timeout_secs=5)
    async with FakeMessagesApi() as api:
        api.responder = gone
        config = config.model_copy(update={"base_url": api.base_url})
        ledger = UsageLedger(DailyBudget(clock, 5.0))
        client = _client(config, clock)
        reflector = ClaudeReflector(
            client=client, config=config, clock=clock, ledger=ledger,
            max_per_day=5, journal=lambda line: journal.append(dict(line)),
        )  # fmt: skip
        writer = MemoryWriter(
            clock, SqliteMemoryStore(tmp_path / "memory.db"), MemoryOutbox(tmp_path / "o.jsonl"),
            MemoryConfig(), HashedNgramEmbedder(), reflector,
        )  # fmt: skip
        for n in range(3):
            open_and_exit(writer, n)
        assert await writer.flush() == 3
        sent = len(api.requests)
        await client.aclose()
    assert sent == 1  # the first exit's call; the model is not asked again
    totals = ledger.totals()
    assert (totals.calls, totals.failed_calls) == (1, 1)
    assert [line["outcome"] for line in journal] == ["failed", "not_sent", "not_sent"]
    assert all("usage" not in line for line in journal)
    assert all(i.author == "rules" for i in await writer._store.list_insights())


def _reports() -> tuple[AnalystReport, ...]:
    return tuple(
        AnalystReport(
            report_id=f"r-{i}", analyst="market", ticker="BTC/USDT", day=utc_day(T0),
            at_ms=T0 + i, content=f"market report {i}", confidence=0.7, timescale="daily",
            figures={"price": 80_000.0 + i},
        )
        for i in range(3)
    )  # fmt: skip


async def test_a_summary_with_a_retired_model_is_not_counted_as_a_failed_call() -> None:
    journal: list[dict[str, Any]] = []
    clock = VirtualClock(T0)
    async with FakeMessagesApi() as api:
        api.responder = gone
        config = AgentConfig(model=RETIRED, base_url=api.base_url, timeout_secs=5)
        ledger = UsageLedger(DailyBudget(clock, 5.0))
        client = _client(config, clock)
        summariser = ClaudeSummariser(
            client, config, ledger, clock=clock, journal=lambda line: journal.append(dict(line))
        )
        request = SummaryRequest(
            analyst="market", ticker="BTC/USDT", day=utc_day(T0), session="post_close",
            reports=_reports(),
        )  # fmt: skip
        summaries = [await make_summary(request, now_ms=T0, model=summariser) for _ in range(3)]
        sent = len(api.requests)
        await client.aclose()
    assert sent == 1
    assert all(s.path == "deterministic" for s in summaries)
    totals = ledger.totals()
    assert (totals.calls, totals.failed_calls) == (1, 1)
    assert [line["outcome"] for line in journal] == ["failed", "not_sent", "not_sent"]


async def test_a_debate_says_a_retired_model_once_not_for_each_role_at_each_decision(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Each role not asked (``ModelGone``) logged 'fell back (model_not_found)' at every decision,
    four warnings a debate for good; the client said the model was gone once, as the decider's
    own path leaves it."""
    async with FakeMessagesApi() as api:
        api.responder = gone
        decider = make(api, memory=None)
        with caplog.at_level(logging.WARNING):
            await decider.decide(snapshot())
            first = _fell_back(caplog)
            for _ in range(3):
                await decider.decide(snapshot())
        await decider.aclose()
    assert first == ["bull", "bear", "trader"]  # their calls went out and 404ed
    assert _fell_back(caplog) == first
    said = [r.args for r in caplog.records if r.name == "agent.claude_client"]
    assert len(said) == 2 and said[0] != said[1]  # once for each model: the roles use two


def _fell_back(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage().split()[1]
        for r in caplog.records
        if r.name == "agent.debate" and "fell back (model_not_found)" in r.getMessage()
    ]
