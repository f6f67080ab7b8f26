"""Debate overhead per decision, model latency excluded: a 3-ticker snapshot from the bundled data
(``runner.prompt_cmd.offline_decision_path``), the real ``DebateDecider`` (six role requests
rendered, answers parsed and validated, memories recalled and written, working memory, trader ->
manager -> AgentDecision, the journal record), with role answers returned at once by
``InstantRoles`` instead of the network. Target: <= 20 ms a decision."""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

import orjson

from agent.breaker import CircuitBreaker
from agent.budget import DailyBudget
from agent.claude import UsageLedger
from agent.claude_client import Attempt, CallResult
from agent.config import AgentConfig
from agent.debate import DebateDecider
from agent.debate_config import DebateConfig
from agent.debate_memory import InProcessMemory, MemoryEntry
from agent.debate_roles import role_of_system_prompt
from agent.decision import Usage
from agent.fallback import FallbackPipeline
from agent.fallback_decider import FallbackDecider
from agent.snapshot import MarketSnapshot
from core.clock import VirtualClock
from runner.config import Settings, SimConfig
from runner.prompt_cmd import offline_decision_path

AT = datetime(2025, 7, 1, tzinfo=UTC)
RUNS = 200
PREFILLED_MEMORIES = 500
T = TypeVar("T")


def _answer(role: str, tickers: Sequence[str]) -> str:
    if role in ("bull", "bear"):
        return orjson.dumps(
            {"summary": f"{role} case: momentum and funding.", "risks": ["r"]}
        ).decode()
    if role == "trader":
        decisions = [
            {
                "ticker": t,
                "action": "BUY" if i == 0 else "HOLD",
                "position_pct": 0.1 if i == 0 else 0,
                "confidence": 0.6,
                "rationale": "momentum and RSI",
            }
            for i, t in enumerate(tickers)
        ]
        return orjson.dumps(
            {
                "decisions": decisions,
                "rationale": "weighed",
                "confidence": 0.6,
                "next_check_seconds": 900,
                "wake_conditions": [],
            }
        ).decode()
    return orjson.dumps(
        {
            "risks": "concentration",
            "strategy": "small entries",
            "next_steps": ["watch funding"],
            "size_reductions": [{"ticker": tickers[0], "position_pct": 0.05}],
        }
    ).decode()


class InstantRoles:
    """``ClaudeClient.call_chain`` without the network: each role's answer parsed at once."""

    def __init__(self, tickers: Sequence[str]) -> None:
        self._tickers = tickers

    async def call_chain(
        self, request: dict[str, Any], parse: Callable[[str], T], failover: Sequence[str] = ()
    ) -> CallResult[T]:
        role = role_of_system_prompt(request["system"][0]["text"]) or "bull"
        value = parse(_answer(role, self._tickers))
        usage = Usage(input_tokens=4000, output_tokens=200, cost_usd=0.0)
        return CallResult(value=value, attempts=[Attempt(attempt=1, outcome="ok", usage=usage)])

    async def aclose(self) -> None:
        return None


async def _run() -> None:
    async with offline_decision_path(Settings(sim=SimConfig(start=AT))) as decision:
        snap = await decision.snapshots.build(["candle_close:BTC/USDT:15m"])
    await _measure(snap)


async def _measure(snap: MarketSnapshot) -> None:
    clock = VirtualClock(snap.at_ms)
    memory = InProcessMemory()
    for n in range(PREFILLED_MEMORIES):
        await memory.remember(
            MemoryEntry(
                text=f"lesson {n}: BTC/USDT medium_volatility up 4h, momentum held {n % 7} h",
                role="manager",
                kind="debate",
                ticker=None,
                created_ms=snap.at_ms - n * 60_000,
                salience=0.5,
            )
        )
    decider = DebateDecider(
        client=InstantRoles(sorted(snap.tickers)),  # type: ignore[arg-type]
        config=AgentConfig(debate=DebateConfig()),
        clock=clock,
        fallback=FallbackDecider(FallbackPipeline(), lambda _t: None, "fallback"),  # type: ignore[arg-type,return-value]
        breaker=CircuitBreaker(clock),
        ledger=UsageLedger(DailyBudget(clock, None)),
        memory=memory,
    )
    await decider.decide(snap)
    times = []
    for _ in range(RUNS):
        started = time.perf_counter()
        result = await decider.decide(snap)
        times.append((time.perf_counter() - started) * 1000.0)
    assert result.decided_by == "debate", result.decider_reason
    median, p95 = statistics.median(times), sorted(times)[int(RUNS * 0.95)]
    print(
        f"debate overhead per decision (3 tickers, 6 role calls answered at once, "
        f"{PREFILLED_MEMORIES}+ memories): median {median:.2f} ms, p95 {p95:.2f} ms over {RUNS} "
        f"decisions (target <= 20 ms) {'OK' if p95 <= 20.0 else 'OVER'}"
    )


def main(argv: list[str] | None = None) -> None:
    asyncio.run(_run())
