"""The rule-based decider's memory rule: size an entry by what similar past trades did.

Rule: a BUY's ``position_pct`` is multiplied by ``entry_scale = clamp(2 * p, 0.5, 1.5)``, where
``p`` is the posterior mean win rate, Beta(2, 2) prior updated with the wins and losses of this
ticker's most similar past trades (cosine of the entry situation vectors) in the current regime,
as the snapshot's ``historical_insights`` states it (agent/memory_view.py computes it).

Why this rule: it is the one lever that turns remembered outcomes into a bounded, explainable
change. A 50 % posterior leaves the size unchanged; the prior worth 4 trades means one or two
trades move it little, and only consistent evidence reaches the bounds; it never opens a trade the
signals did not ask for and never closes one (exits stay the price rules' and the blend's), so
memory cannot make the fallback trade more often, only bigger where it has been right and smaller
where it has been wrong (a fractional-Kelly flavour). The risk caps apply after it, so it can never
exceed the 20 % position cap. The decision's reasoning states the scale and the evidence.
"""

from __future__ import annotations

from typing import Any

from agent.decision import AgentDecision, TradeDecision
from agent.snapshot import MarketSnapshot
from broker.port import Action


def memory_scales(snapshot: MarketSnapshot) -> dict[str, dict[str, Any]]:
    return {
        item["ticker"]: item
        for item in snapshot.historical_insights or []
        if item.get("kind") == "posterior"
    }


def apply_memory_rule(decision: AgentDecision, snapshot: MarketSnapshot) -> AgentDecision:
    scales = memory_scales(snapshot)
    if not scales:
        return decision
    changed: list[TradeDecision] = []
    sized = False
    for d in decision.decisions:
        item = scales.get(d.ticker)
        if d.action is not Action.BUY or d.position_pct <= 0 or item is None:
            changed.append(d)
            continue
        scale = float(item["entry_scale"])
        note = (
            f" | memory rule: size x{scale:.2f} (posterior win rate "
            f"{item['posterior_win_rate']:.2f} from {item['wins']}/{item['similar_trades']} wins "
            f"of similar {d.ticker} trades in {item['regime']}, {item['prior']} prior): "
            f"{d.position_pct:.4f} -> {min(1.0, d.position_pct * scale):.4f}"
        )
        sized = True
        changed.append(
            d.model_copy(
                update={
                    "position_pct": min(1.0, d.position_pct * scale),
                    "reasoning": (d.reasoning + note)[:4000],
                }
            )
        )
    if not sized:  # no BUY to size (most decisions): the copy would be the decision itself
        return decision
    return decision.model_copy(update={"decisions": tuple(changed)})
