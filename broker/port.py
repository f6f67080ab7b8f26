"""The Broker port. The paper broker and the ccxt broker (#6) implement it; tests use a fake."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field


class Action(enum.StrEnum):
    BUY = "BUY"
    SELL = "SELL"
    HOLD = "HOLD"


class OrderIntent(BaseModel):
    """A capped, whitelisted decision ready for the broker. Quantities are in quote (USDT)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    decision_id: str
    ticker: str
    action: Literal[Action.BUY, Action.SELL]
    notional_usd: float = Field(gt=0.0)
    reference_price: float = Field(gt=0.0)
    position_pct: float = Field(ge=0.0, le=1.0)
    signal_weights: dict[str, float] = Field(default_factory=dict)
    #: the crypto regime of the ticker when the decision was made ("" unknown); kept with the
    #: order so a position adopted after a restart still knows the regime it was entered in
    regime: str = ""
    reasoning: str = ""


class PositionDetail(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    ticker: str
    quantity: float  # base units, > 0 (long-only for now)
    entry_price: float
    mark_price: float | None
    opened_at_ms: int
    #: what the order that opened the position carried (the learner's inputs at exit); empty /
    #: "" when the broker does not know (a position placed by a person, an order record lost)
    signals: dict[str, float] = Field(default_factory=dict)
    regime: str = ""

    @property
    def notional_usd(self) -> float:
        return self.quantity * (
            self.mark_price if self.mark_price is not None else self.entry_price
        )


class OrderResult(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    client_order_id: str
    ticker: str
    side: Literal["buy", "sell"]
    status: Literal["filled", "open", "rejected", "cancelled"]
    requested_notional_usd: float
    filled_quantity: float = 0.0
    average_price: float | None = None
    fee_usd: float = 0.0
    #: the exchange's fee could not be read: ``fee_usd`` is the configured rate x notional
    fee_estimated: bool = False
    reason: str = ""
    at_ms: int = Field(0, ge=0)


class OpenOrder(BaseModel):
    """An order resting on the book: what it will add to the position if it fills.

    Risk caps count a resting BUY as held (it becomes exposure without another decision), and the
    snapshot shows it to the decider so it does not ask for the same position twice.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    client_order_id: str
    ticker: str
    side: Literal["buy", "sell"]
    quantity: float = Field(ge=0.0)  # base units still to fill
    limit_price: float | None  # None for a market order
    notional_usd: float = Field(ge=0.0)  # unfilled quantity x limit (market: as requested)
    placed_at_ms: int = Field(ge=0)
    expires_at_ms: int | None = None  # None: good till cancelled


class Broker(Protocol):
    async def execute_decisions(self, intents: Sequence[OrderIntent]) -> Sequence[OrderResult]: ...

    async def get_positions_detail(self) -> Sequence[PositionDetail]: ...

    async def get_portfolio_value(self) -> float: ...

    async def get_cash(self) -> float: ...

    async def get_open_orders(self) -> Sequence[OpenOrder]:
        """Orders placed and not yet filled, cancelled or expired, oldest first."""
        ...

    async def cancel(self, client_order_id: str) -> OrderResult | None: ...

    async def lookup(self, client_order_id: str) -> OrderResult | None: ...
