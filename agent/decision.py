"""What a decider (Claude or the rule-based fallback) answers, before and after validation.

``AgentDecision`` is the one shape every decider produces and everything downstream consumes: the risk
caps, the broker, the gate update, the journal. Values are checked for type and range here; business
caps (ticker whitelist, position size, exposure, cash) are applied afterwards by ``agent.risk``, so no
decider can bypass them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from broker.port import Action

#: "unchanged": delta gating decided without a call (agent.materiality)
DecidedBy = Literal["claude", "debate", "fallback", "unchanged"]


class TradeDecision(BaseModel):
    """One ticker's decision. ``position_pct`` is a fraction of portfolio value (0.10 = 10 %)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ticker: str = Field(min_length=1, max_length=32)
    action: Action
    position_pct: float = Field(0.0, ge=0.0, le=1.0)
    confidence: float = Field(0.5, ge=0.0, le=1.0)
    reasoning: str = Field("", max_length=4000)
    signal_weights: dict[str, float] = Field(default_factory=dict)

    @field_validator("signal_weights")
    @classmethod
    def _finite_weights(cls, weights: dict[str, float]) -> dict[str, float]:
        # One sum instead of a check per weight: a NaN or an infinity makes the sum non-finite
        # (an overflow of finite weights too: the check below then finds nothing to refuse).
        if math.isfinite(sum(weights.values())):
            return weights
        bad = [name for name, value in weights.items() if not math.isfinite(value)]
        if bad:
            raise ValueError(f"non-finite signal weights: {bad}")
        return weights


class Usage(BaseModel):
    """Tokens and cost of one model call (prices from config)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    input_tokens: int = Field(0, ge=0)
    output_tokens: int = Field(0, ge=0)
    cache_creation_input_tokens: int = Field(0, ge=0)
    cache_read_input_tokens: int = Field(0, ge=0)
    cost_usd: float = Field(0.0, ge=0.0)
    #: the model billed (several joined by "+" when a decision asked more than one)
    model: str | None = None


class AgentDecision(BaseModel):
    """A decider's whole answer for one snapshot."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    decisions: tuple[TradeDecision, ...] = ()
    market_assessment: str = Field("", max_length=4000)
    #: does the decider agree with the HMM regime model's labels? None: it did not say
    regime_agreement: bool | None = None
    regime_agreement_reason: str = Field("", max_length=1000)  # the decider's words on it
    learning_note: str = Field("", max_length=2000)
    next_check_seconds: int = 900  # clamped by the gate to [60, 3600]
    wake_conditions: tuple[dict[str, Any], ...] = ()  # validated by the gate, not here
    memory_update: str | None = None
    decided_by: DecidedBy
    decider_reason: str = ""  # why this decider decided (e.g. "no_api_key", "breaker_open")
    usage: Usage | None = None  # the model calls behind this decision (None: no call made)
    attempts: tuple[dict[str, Any], ...] = ()  # each model attempt: outcome, error, usage
    #: the debate decider's roles, memories and costs (``agent.debate_record``); None otherwise
    debate: dict[str, Any] | None = None


def dumped_decisions(decision: AgentDecision, raw: Mapping[str, Any]) -> tuple[Any, ...]:
    """``tuple(d.model_dump(mode="json") for d in decision.decisions)``, taken from ``raw``, the
    decision's own JSON dump (a nested model is dumped as it dumps itself: dumping the three
    again cost more than the whole answer's dump). The dicts are the line's: read-only."""
    if type(decision) is AgentDecision and all(map(_is_trade_decision, decision.decisions)):
        return tuple(raw["decisions"])
    return tuple(d.model_dump(mode="json") for d in decision.decisions)


def _is_trade_decision(decision: object) -> bool:
    return type(decision) is TradeDecision
