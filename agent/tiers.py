"""Model tiers: a cheaper model for routine passes, the strongest where a mistake costs money.

- ``model`` (the strong one) for anomalies, wake conditions, the watchdog and loud candle closes
  (a ticker's |return z-score| at or above ``TierConfig.loud_zscore``);
- ``TierConfig.routine_model`` for timer passes, quiet candle closes and the tracker's reviews;
- an entry is the strong model's call: when a routine answer would open a position (a BUY of a
  ticker neither held nor resting), the strong model is asked the same request and its answer is
  the one used (``escalate_entries``).
``routine_model`` None: one model for everything.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from agent.decision import AgentDecision
from agent.materiality import is_routine
from agent.model_id import ModelId
from broker.port import Action

if TYPE_CHECKING:  # the snapshot needs pandas; the settings (every CLI command) do not
    from agent.snapshot import MarketSnapshot


class TierConfig(BaseModel):
    """``[agent.tiers]``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    routine_model: ModelId | None = "claude-haiku-4-5"
    loud_zscore: float = Field(1.5, gt=0)  # a close this loud is not routine
    escalate_entries: bool = True


def choose_model(strong: str, tiers: TierConfig, snapshot: MarketSnapshot) -> tuple[str, str]:
    """The model for ``snapshot`` and why."""
    if tiers.routine_model is None:
        return strong, "one model"
    reasons: Sequence[str] = snapshot.gate_wake_reasons
    if not is_routine(list(reasons)):
        return strong, "not a routine pass"
    loud = [
        ticker
        for ticker, view in sorted(snapshot.tickers.items())
        if view.return_zscore is not None and abs(view.return_zscore) >= tiers.loud_zscore
    ]
    if loud:
        return strong, f"loud close ({', '.join(loud)} |z| >= {tiers.loud_zscore:g})"
    return tiers.routine_model, "routine pass"


def opens_position(decision: AgentDecision, snapshot: MarketSnapshot) -> bool:
    """Would ``decision`` enter a position (BUY of a ticker neither held nor resting)?"""
    held = {p.ticker for p in snapshot.open_positions} | {o.ticker for o in snapshot.pending_orders}
    return any(d.action is Action.BUY and d.ticker not in held for d in decision.decisions)
