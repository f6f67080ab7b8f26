"""The paper account's money: cash, reserved cash, open positions, realised PnL and fees, in Decimal.

Every amount of money is a multiple of ``MONEY_QUANTUM`` (1e-8 USD) and every change is an exact
addition or subtraction of such amounts (checked: the arithmetic context traps any rounding), so the
ledger identity

    starting cash + realised PnL - fees == cash + reserved + cost basis of open positions

holds to the last unit after any number of operations. The one place a value is rounded, the share
of cost basis a partial sell removes, is rounded once and then moved exactly.

The ledger is immutable: each operation returns a new one, so a caller can keep the previous one as
a rollback point for free.
"""

from __future__ import annotations

import decimal
from decimal import Decimal
from typing import Final

from pydantic import BaseModel, ConfigDict, Field

MONEY_QUANTUM: Final = Decimal("0.00000001")
ZERO: Final = Decimal(0)

#: additions and subtractions of money: any rounding would break the identity, so it raises
EXACT: Final = decimal.Context(
    prec=60,
    traps=[decimal.Inexact, decimal.Rounded, decimal.InvalidOperation, decimal.DivisionByZero],
)
#: products and quotients that are rounded on purpose (then quantized to money or a quantity step)
WIDE: Final = decimal.Context(
    prec=60, rounding=decimal.ROUND_HALF_EVEN, traps=[decimal.InvalidOperation]
)


class LedgerError(ValueError):
    """An operation the ledger cannot do (caller bug or insufficient cash); nothing changed."""


class InsufficientCashError(LedgerError):
    pass


def money(value: Decimal) -> Decimal:
    """``value`` rounded (half-even) to a whole number of ``MONEY_QUANTUM``."""
    return value.quantize(MONEY_QUANTUM, rounding=decimal.ROUND_HALF_EVEN, context=WIDE)


def to_decimal(value: float | int | str | Decimal) -> Decimal:
    """A float from the API boundary as the decimal it prints as (``0.1`` -> ``Decimal('0.1')``)."""
    if isinstance(value, Decimal):
        result = value
    elif isinstance(value, float):
        result = Decimal(repr(value))
    else:
        result = Decimal(value)
    if not result.is_finite():
        raise ValueError(f"not a finite number: {value!r}")
    return result


def _require_money(name: str, value: Decimal, *, positive: bool = False) -> None:
    if value != money(value):
        raise LedgerError(f"{name} {value} is not a whole number of {MONEY_QUANTUM} USD")
    if value < 0 or (positive and value == 0):
        raise LedgerError(f"{name} must be {'> 0' if positive else '>= 0'}, got {value}")


class Position(BaseModel):
    """A long position: ``cost_basis_usd`` is what its quantity cost, fees excluded."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ticker: str
    quantity: Decimal = Field(gt=0)
    cost_basis_usd: Decimal = Field(ge=0)
    opened_at_ms: int = Field(ge=0)

    @property
    def average_entry_price(self) -> Decimal:
        return WIDE.divide(self.cost_basis_usd, self.quantity)


class Ledger(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    starting_cash_usd: Decimal = Field(ge=0)
    cash_usd: Decimal = Field(ge=0)  # free: neither spent nor reserved by an open order
    reserved_usd: Decimal = Field(ge=0)  # held by open buy orders (their cost plus fee)
    realised_pnl_usd: Decimal = ZERO  # sale proceeds minus the cost basis they closed, fees apart
    fees_paid_usd: Decimal = Field(ZERO, ge=0)
    positions: dict[str, Position] = Field(default_factory=dict)

    @classmethod
    def fresh(cls, starting_cash_usd: Decimal) -> Ledger:
        cash = money(starting_cash_usd)
        _require_money("starting cash", cash)
        return cls(starting_cash_usd=cash, cash_usd=cash, reserved_usd=ZERO)

    @property
    def open_cost_basis_usd(self) -> Decimal:
        with decimal.localcontext(EXACT):
            return sum((p.cost_basis_usd for p in self.positions.values()), ZERO)

    def identity_gap_usd(self) -> Decimal:
        """(starting + realised - fees) - (cash + reserved + open cost basis); 0 when consistent."""
        with decimal.localcontext(EXACT):
            books = self.starting_cash_usd + self.realised_pnl_usd - self.fees_paid_usd
            held = self.cash_usd + self.reserved_usd + self.open_cost_basis_usd
            return books - held

    def check_consistent(self) -> None:
        """Raise ``LedgerError`` unless every amount is whole money and the identity holds."""
        for name in ("starting_cash_usd", "cash_usd", "reserved_usd", "fees_paid_usd"):
            _require_money(name, getattr(self, name))
        if self.realised_pnl_usd != money(self.realised_pnl_usd):
            raise LedgerError(f"realised PnL {self.realised_pnl_usd} is not whole money")
        for key, position in self.positions.items():
            if key != position.ticker:
                raise LedgerError(f"position filed under {key!r} is for {position.ticker!r}")
            _require_money(f"{key} cost basis", position.cost_basis_usd)
        gap = self.identity_gap_usd()
        if gap != 0:
            raise LedgerError(
                f"the ledger does not balance: starting cash + realised PnL - fees differs "
                f"from cash + reserved + cost basis by {gap} USD"
            )

    def reserve(self, amount_usd: Decimal) -> Ledger:
        """Move free cash to reserved (an order was placed)."""
        _require_money("reserve amount", amount_usd, positive=True)
        if amount_usd > self.cash_usd:
            raise InsufficientCashError(
                f"insufficient cash: needs {amount_usd} USD, {self.cash_usd} USD free"
            )
        with decimal.localcontext(EXACT):
            return self._with(
                cash_usd=self.cash_usd - amount_usd, reserved_usd=self.reserved_usd + amount_usd
            )

    def release(self, amount_usd: Decimal) -> Ledger:
        """Move reserved cash back to free (an order was cancelled or expired)."""
        _require_money("release amount", amount_usd, positive=True)
        self._require_reserved(amount_usd)
        with decimal.localcontext(EXACT):
            return self._with(
                cash_usd=self.cash_usd + amount_usd, reserved_usd=self.reserved_usd - amount_usd
            )

    def settle_buy(
        self,
        ticker: str,
        *,
        reserved_usd: Decimal,
        quantity: Decimal,
        cost_usd: Decimal,
        fee_usd: Decimal,
        at_ms: int,
    ) -> Ledger:
        """A buy filled: its reservation pays the cost (into the position) and the fee.

        Whatever of the reservation the fill did not need goes back to free cash.
        """
        _require_money("reservation", reserved_usd, positive=True)
        _require_money("cost", cost_usd, positive=True)
        _require_money("fee", fee_usd)
        if quantity <= 0:
            raise LedgerError(f"buy quantity must be > 0, got {quantity}")
        self._require_reserved(reserved_usd)
        with decimal.localcontext(EXACT):
            change = reserved_usd - cost_usd - fee_usd
            if change < 0:
                raise LedgerError(
                    f"fill costs {cost_usd + fee_usd} USD but only {reserved_usd} USD was reserved"
                )
            held = self.positions.get(ticker)
            position = (
                Position(
                    ticker=ticker, quantity=quantity, cost_basis_usd=cost_usd, opened_at_ms=at_ms
                )
                if held is None
                else held.model_copy(
                    update={
                        "quantity": held.quantity + quantity,
                        "cost_basis_usd": held.cost_basis_usd + cost_usd,
                    }
                )
            )
            return self._with(
                cash_usd=self.cash_usd + change,
                reserved_usd=self.reserved_usd - reserved_usd,
                fees_paid_usd=self.fees_paid_usd + fee_usd,
                positions={**self.positions, ticker: position},
            )

    def settle_sell(
        self, ticker: str, *, quantity: Decimal, proceeds_usd: Decimal, fee_usd: Decimal
    ) -> tuple[Ledger, Decimal]:
        """A sell filled: proceeds minus fee to cash. Returns the new ledger and the cost basis closed.

        Selling the whole position closes its whole cost basis; a partial sell closes the same
        share of it (rounded once to money).
        """
        _require_money("proceeds", proceeds_usd)
        _require_money("fee", fee_usd)
        held = self.positions.get(ticker)
        if held is None:
            raise LedgerError(f"no position in {ticker} to sell")
        if not 0 < quantity <= held.quantity:
            raise LedgerError(
                f"cannot sell {quantity} {ticker}: the position holds {held.quantity}"
            )
        if fee_usd > proceeds_usd + self.cash_usd:
            raise InsufficientCashError(f"fee {fee_usd} USD exceeds proceeds and free cash")
        closes_all = quantity == held.quantity
        closed_basis = (
            held.cost_basis_usd
            if closes_all
            else money(WIDE.divide(WIDE.multiply(held.cost_basis_usd, quantity), held.quantity))
        )
        with decimal.localcontext(EXACT):
            positions = dict(self.positions)
            if closes_all:
                del positions[ticker]
            else:
                positions[ticker] = held.model_copy(
                    update={
                        "quantity": held.quantity - quantity,
                        "cost_basis_usd": held.cost_basis_usd - closed_basis,
                    }
                )
            ledger = self._with(
                cash_usd=self.cash_usd + proceeds_usd - fee_usd,
                realised_pnl_usd=self.realised_pnl_usd + proceeds_usd - closed_basis,
                fees_paid_usd=self.fees_paid_usd + fee_usd,
                positions=positions,
            )
        return ledger, closed_basis

    def _require_reserved(self, amount_usd: Decimal) -> None:
        if amount_usd > self.reserved_usd:
            raise LedgerError(f"{amount_usd} USD is more than the {self.reserved_usd} USD reserved")

    def _with(self, **changes: object) -> Ledger:
        # model_copy skips validation: the methods above check everything they change
        return self.model_copy(update=changes)
