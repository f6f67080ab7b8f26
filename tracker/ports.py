"""Ports of the position tracker."""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field


class ReviewAction(enum.StrEnum):
    EXIT = "EXIT"
    ADD = "ADD"
    HOLD = "HOLD"


class PositionReview(BaseModel):
    """One open position as the 3-minute agent layer sees it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ticker: str
    entry_price: float
    mark_price: float
    pnl_pct: float
    peak_pnl_pct: float
    holding_secs: float
    regime_at_entry: str
    regime_now: str
    entry_signals: dict[str, float] = Field(default_factory=dict)


class ReviewVerdict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    ticker: str
    action: ReviewAction
    reason: str
    decided_by: str  # "claude" or "fallback"


class PositionReviewer(Protocol):
    """The agent layer: Claude's EXIT / ADD / HOLD per position (#5), or the fallback score."""

    async def review(
        self, positions: Sequence[PositionReview], context: Mapping[str, object]
    ) -> Sequence[ReviewVerdict]: ...


class _HeldPositions(Protocol):
    @property
    def positions(self) -> Mapping[str, object]: ...


@runtime_checkable
class HeldView(Protocol):
    """A broker's synchronous, side-effect-free view of what it holds (``PaperBroker``'s): lets a
    replay pass over an agent cycle whose reconcile would find nothing (``PositionTracker``)."""

    @property
    def ledger(self) -> _HeldPositions: ...

    def open_orders(self) -> Sequence[object]: ...
