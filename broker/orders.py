"""What the paper broker records about each order and each market price, in exact units.

``PaperOrder`` is both the in-memory record and its persisted form; ``to_result`` converts it to
the port's float ``OrderResult`` at the API boundary. ``Fill`` and ``BookUpdate`` say what one
operation of the book (``broker.book``) changed.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from broker.ledger import ZERO
from broker.port import OrderResult

OrderStatus = Literal["open", "filled", "rejected", "cancelled"]
Side = Literal["buy", "sell"]


class PaperOrder(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    client_order_id: str
    decision_id: str
    ticker: str
    side: Side
    status: OrderStatus
    requested_notional_usd: Decimal
    reference_price: Decimal
    limit_price: Decimal | None = None  # BUY limits
    quantity: Decimal = ZERO  # ordered, base units
    reserved_usd: Decimal = ZERO  # what an open BUY holds back: cost at the limit plus maker fee
    filled_quantity: Decimal = ZERO
    average_price: Decimal | None = None
    fee_usd: Decimal = ZERO  # charged (0 until filled)
    closed_cost_basis_usd: Decimal | None = None  # SELLs: the cost basis the sale closed
    realised_pnl_usd: Decimal | None = None  # SELLs: proceeds minus closed cost basis, fees apart
    reason: str = ""
    placed_at_ms: int = Field(ge=0)
    updated_at_ms: int = Field(ge=0)  # when the status last changed
    expires_at_ms: int | None = None  # open BUYs
    signal_weights: dict[str, float] = Field(default_factory=dict)
    regime: str = ""  # the entry's regime (BUYs), "" unknown

    @property
    def is_open(self) -> bool:
        return self.status == "open"

    def to_result(self) -> OrderResult:
        return OrderResult(
            client_order_id=self.client_order_id,
            ticker=self.ticker,
            side=self.side,
            status=self.status,
            requested_notional_usd=float(self.requested_notional_usd),
            filled_quantity=float(self.filled_quantity),
            average_price=None if self.average_price is None else float(self.average_price),
            fee_usd=float(self.fee_usd),
            reason=self.reason,
            at_ms=self.updated_at_ms,
        )


class Mark(NamedTuple):
    """The last market price seen for a ticker, and the market time it traded at.

    A tuple, not a model: one is made per market tick, so it must be cheap.
    """

    price: float
    at_ms: int


@dataclass(frozen=True)
class Fill:
    """An order that just filled, with the position it left behind."""

    order: PaperOrder
    opened_position: bool  # a BUY that opened a new position (not a top-up)
    position_quantity: Decimal  # after the fill; 0 when a SELL closed the position
    position_entry_price: Decimal | None  # average entry after the fill; None when closed


@dataclass(frozen=True)
class BookUpdate:
    """What one market update or expiry sweep changed."""

    fills: tuple[Fill, ...] = ()
    expired: tuple[PaperOrder, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.fills or self.expired)


NO_UPDATE = BookUpdate()
