"""The Decider port: Claude (#5) and the rule-based fallback both implement it."""

from __future__ import annotations

from typing import Protocol

from agent.decision import AgentDecision
from agent.prompt_assembly import AssembledPrompt
from agent.snapshot import MarketSnapshot


class Decider(Protocol):
    async def decide(
        self, snapshot: MarketSnapshot, prompt: AssembledPrompt | None = None
    ) -> AgentDecision:
        """Decide for ``snapshot``. Never raises for a bad answer: it falls back and says why.
        ``prompt``: the assembled prompt (context tiers, memory, budgets) when one is wired."""
        ...
