"""Prompt assembly: time per assembled prompt for a full context, and input tokens per Claude call
before (system prompt + snapshot) and after (assembled parts), on the fake Messages API's counts.

The full context: an organisation policy with a rubric, MEMORY.md with 30 person lines and 50 auto
lines, 5 rules, a week of analyst reports and their 24 day summaries (3 tickers), 5 insights per
ticker, the session entries of 3 tickers. The snapshot is the offline one from the bundled data.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from agent.claude_client import ClaudeClient, build_anthropic_client
from agent.claude_prompt import render_request
from agent.config import AgentConfig
from agent.decision_context import DecisionContext
from agent.prompt_assembly import PromptAssembler
from agent.snapshot import MarketSnapshot
from core.clock import DAY_MS, VirtualClock
from memory.analyst_store import AnalystStore
from memory.analysts import AnalystDesk
from memory.context import ContextAssembler, InsightItem
from memory.session_store import SessionStore, session_key
from memory.tiers import OrganisationTier, ProjectTier
from runner.config import Settings
from runner.prompt_cmd import build_offline_snapshot

CALLS = 12
_TESTS = Path(__file__).resolve().parent.parent / "tests"


class _Insights:
    async def top_insights(self, ticker: str, regime: str | None, k: int) -> list[InsightItem]:
        return [
            InsightItem(
                text=f"{ticker} in {regime}: lesson {i}: entries after a 2-sigma drop "
                "recovered within 12 h in 7 of 10 trades; size small when funding is hot.",
                score=0.9 - i * 0.1,
                ticker=ticker,
                insight_id=f"{ticker}-{i}",
            )
            for i in range(k)
        ]


def _state(root: Path, clock: VirtualClock, tickers: tuple[str, ...]) -> tuple[Path, SessionStore]:
    org = root / "org"
    org.mkdir()
    (org / "policy.toml").write_text(
        'max_position_pct = 0.15\nbanned_tickers = ["DOGE/USDT"]\ntext = "No leverage above 1x."\n'
    )
    (org / "rubric.md").write_text("A good decision names its signals. " * 20)
    lines = ["# MEMORY", *(f"Person note {i}: watch funding on weekends." for i in range(30))]
    (root / "MEMORY.md").write_text("\n".join(lines) + "\n")
    project = ProjectTier(root)
    for i in range(50):
        project.remember(f"2025-02-{(i % 28) + 1:02d}", tickers[i % 3], f"auto entry {i}")
    (root / "rules").mkdir()
    for i, pattern in enumerate(['["*"]', '["BTC/*"]', '["SOL/*", "ETH/*"]', '["*"]', '["X/*"]']):
        (root / "rules" / f"r{i}.md").write_text(f"---\ntickers: {pattern}\n---\nRule {i}.\n")
    session = SessionStore(root / "sessions", clock, durable=False)
    for ticker in tickers:
        session.set(session_key(ticker, "decision"), {"action": "HOLD", "reasoning": "wait " * 20})
        session.set(session_key(ticker, "analysis", "thesis"), "Trend continuation. " * 5)
    return org, session


async def _build(root: Path, snapshot: MarketSnapshot) -> tuple[DecisionContext, SessionStore]:
    clock = VirtualClock(epoch_ms=snapshot.at_ms)
    tickers = tuple(snapshot.tickers)
    org, session = _state(root, clock, tickers)
    desk = AnalystDesk(AnalystStore(root / "analysts.db"), tickers)
    sent = snapshot.as_sent()
    for step in range(7 * 24):  # a week of hourly decisions before now
        at = snapshot.at_ms - 7 * DAY_MS + step * 3_600_000
        await desk.roll(at)
        desk.observe(sent, at)
    await desk.roll(snapshot.at_ms)
    assembler = ContextAssembler(
        organisation=OrganisationTier(org),
        project=ProjectTier(root),
        session=session,
        analysts=desk,
        insights=_Insights(),
        person_notes=lambda: "Operator: be careful around CPI releases.",
    )
    return DecisionContext(PromptAssembler(assembler), analysts=desk, session=session), session


def _p(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q) - 1]


async def _timing(context: DecisionContext, snapshot: MarketSnapshot) -> dict[str, float]:
    prompts = context.prompts
    wall, cpu = [], []
    sent = snapshot.as_sent()
    for _ in range(500):
        t, c = time.perf_counter(), time.thread_time()
        await prompts.assemble(snapshot, sent)
        cpu.append((time.thread_time() - c) * 1e3)
        wall.append((time.perf_counter() - t) * 1e3)
    return {
        "wall_p50_ms": _p(wall, 50),
        "wall_p95_ms": _p(wall, 95),
        "cpu_p50_ms": _p(cpu, 50),
        "cpu_p95_ms": _p(cpu, 95),
    }


async def _timing_per_decision(
    context: DecisionContext, session: SessionStore, snapshot: MarketSnapshot
) -> dict[str, float]:
    """As a decision meets it: a new snapshot each time (its as-sent form and JSON made anew)
    and the session entries the decision before wrote; the tiers and summaries unchanged."""
    prompts = context.prompts
    cpu = []
    for i in range(500):
        fresh = _variant(snapshot, i + 1)
        for ticker in fresh.tickers:  # the last decision's write-back, outside the timing
            session.set(session_key(ticker, "decision"), {"action": "HOLD", "at_ms": i})
        c = time.thread_time()
        await prompts.assemble(fresh, fresh.as_sent())
        cpu.append((time.thread_time() - c) * 1e3)
    return {"cpu_p50_ms": _p(cpu, 50), "cpu_p95_ms": _p(cpu, 95)}


async def _tokens(requests: list[dict[str, Any]], fakes: Any) -> dict[str, float]:
    counter = fakes.token_counts.CacheCounter()
    async with fakes.messages_api.FakeMessagesApi(usage_for=counter.usage_for) as api:
        api.script(*(fakes.messages_api.text_message("{}") for _ in requests))
        config = AgentConfig(base_url=api.base_url)
        client = ClaudeClient(
            build_anthropic_client(config, "sk-bench"), VirtualClock(), config.pricing
        )
        totals = {"input": 0, "write": 0, "read": 0}
        for request in requests:
            result = await client.call(request, lambda text: text)
            usage = result.attempts[-1].usage
            assert usage is not None
            totals["input"] += usage.input_tokens
            totals["write"] += usage.cache_creation_input_tokens
            totals["read"] += usage.cache_read_input_tokens
        await client.aclose()
    all_in = sum(totals.values())
    return {
        "input_tokens_per_call": all_in / len(requests),
        "uncached_per_call": (totals["input"] + totals["write"]) / len(requests),
        "cached_share": totals["read"] / all_in,
    }


def _variant(snapshot: MarketSnapshot, i: int) -> MarketSnapshot:
    """The snapshot ``i`` decisions (15 minutes each) later, prices moved."""
    tickers = {
        t: v.model_copy(update={"price": (v.price or 1.0) * (1 + i / 1000)})
        for t, v in snapshot.tickers.items()
    }
    return snapshot.model_copy(update={"at_ms": snapshot.at_ms + i * 900_000, "tickers": tickers})


def _variants(snapshot: MarketSnapshot) -> list[MarketSnapshot]:
    return [_variant(snapshot, i) for i in range(CALLS)]


async def _run() -> None:
    sys.path.insert(0, str(_TESTS))
    import fakes.messages_api
    import fakes.token_counts

    snapshot = await build_offline_snapshot(Settings())
    with tempfile.TemporaryDirectory(prefix="bench-prompt-") as scratch:
        context, session = await _build(Path(scratch), snapshot)
        timing = await _timing(context, snapshot)
        per_decision = await _timing_per_decision(context, session, snapshot)
        sample = await context.prompts.assemble(snapshot)
        config = AgentConfig()
        before = [render_request(config, s) for s in _variants(snapshot)]
        after = [(await context.prompts.assemble(s)).request(config) for s in _variants(snapshot)]
        tok_before = await _tokens(before, fakes)
        tok_after = await _tokens(after, fakes)
    info = sample.info
    print(
        f"full context: parts {info.parts}, context {info.context_chars} chars, trimmed {len(info.trimmed)}, cut {len(info.cut)}"
    )
    print(
        "assembly of a full context (tiers + analysts + insights + trim + render), 500 runs: "
        f"CPU p50 {timing['cpu_p50_ms']:.2f} ms, p95 {timing['cpu_p95_ms']:.2f} ms; "
        f"wall p50 {timing['wall_p50_ms']:.2f} ms, p95 {timing['wall_p95_ms']:.2f} ms "
        f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)"
    )
    print(
        "per decision (a new snapshot as sent, new session entries; tiers unchanged), 500 runs: "
        f"CPU p50 {per_decision['cpu_p50_ms']:.2f} ms, p95 {per_decision['cpu_p95_ms']:.2f} ms"
    )
    for name, t in (("before", tok_before), ("after", tok_after)):
        print(
            f"{name}: {t['input_tokens_per_call']:.0f} input tokens per call "
            f"({t['uncached_per_call']:.0f} uncached or cache-write), cached share "
            f"{t['cached_share']:.0%} over {CALLS} calls"
        )


def main(argv: list[str] | None = None) -> None:
    asyncio.run(_run())
