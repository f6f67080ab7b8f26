"""What a replay with a model decider is expected to cost, printed before it spends anything."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from agent.config import AgentConfig
from agent.debate_config import Role
from market.timeframes import TIMEFRAME_MS
from runner.config import Settings

if TYPE_CHECKING:
    from runner.replay.build import ReplayOptions


def expected_calls_text(options: ReplayOptions, settings: Settings) -> str:
    """What a Claude replay of the span would ask, from the gate's and the tracker's settings."""
    span_ms = options.end_ms - options.start_ms
    closes = int(span_ms // TIMEFRAME_MS["15m"])
    cooldown_secs = settings.gate.cooldown_secs
    review_secs = settings.tracker.agent_interval_secs
    most = int(span_ms // (cooldown_secs * 1000)) if cooldown_secs > 0 else None
    reviews = int(span_ms // (review_secs * 1000))
    ceiling = (
        f"at most about {most} (one per {cooldown_secs:g} s cooldown)"
        if most is not None and most >= closes
        else "more when the gate's other layers fire (no cooldown)"
        if most is None
        else f"about {closes} (the {cooldown_secs:g} s cooldown lets only closes through)"
    )
    text = (
        f"{options.days:g} days would make at least {closes} decision calls (one per 15m close) "
        f"and {ceiling}, plus up to {reviews} position reviews (one per {review_secs:g} s while "
        "a position is open)"
    )
    if options.decider == "debate":
        text = (
            debate_calls_text(settings, closes, options.days)
            + "; "
            + text.replace("decision calls", "decisions", 1)
        )
    return text


def debate_calls_text(settings: Settings, decisions: int, days: float) -> str:
    """Debate calls and dollars at list price for ``decisions`` (before any review)."""
    agent = settings.agent
    estimate = debate_cost_estimate(agent, decisions)
    return (
        f"debate: {agent.debate.calls_per_decision()} calls per decision "
        f"({agent.debate.bb_rounds} bull/bear rounds, trader, manager) -> at least "
        f"{estimate.calls:,} calls, about ${estimate.usd:,.2f} at list price "
        f"(${estimate.usd / max(days, 1e-9):,.2f} per day; {DEBATE_INPUT_TOKENS_PER_CALL:,} input "
        "tokens per call, half the role's max_tokens out)"
    )


#: a debate role call's input: snapshot (~2.5k tokens for 3 tickers) + prompt + memories + window
DEBATE_INPUT_TOKENS_PER_CALL = 4_000


@dataclass(frozen=True)
class CostEstimate:
    calls: int
    usd: float


def debate_cost_estimate(agent: AgentConfig, decisions: int) -> CostEstimate:
    """Calls and list-price dollars of ``decisions`` debates (reflections not counted)."""
    debate = agent.debate
    per_decision = 0.0
    roles: tuple[Role, ...] = ("bull", "bear") * debate.bb_rounds + ("trader", "manager")
    for role in roles:
        config = debate.role(role)
        model = config.model or agent.model
        pricing = agent.for_model(model)
        out_tokens = min(config.max_tokens, agent.max_tokens) // 2
        per_decision += pricing.cost_usd(DEBATE_INPUT_TOKENS_PER_CALL, out_tokens)
    return CostEstimate(calls=decisions * len(roles), usd=decisions * per_decision)
