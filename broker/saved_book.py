"""Checks of what a paper state file says, beyond its schema: each figure one the fill rules and
valuations can use (``broker.book.PaperBook.from_document`` runs them; a failed one refuses the
file, left untouched)."""

from __future__ import annotations

from decimal import Decimal

from broker.exchange_answer import MAX_MAGNITUDE
from broker.fills import check_market_prices, value_usd
from broker.ledger import Position
from broker.orders import Mark, PaperOrder
from broker.paper_store import InvalidPaperStateError


def fills_from_reservation(order: PaperOrder, limit: Decimal) -> bool:
    """An open BUY the fill rules can fill: nothing filled yet, a quantity and limit > 0, and
    its cost within what it reserved (``filled_buy`` pays cost and fee from the reservation).
    Loaded otherwise, it failed every read of the open orders or every tick through its limit."""
    if order.filled_quantity != 0 or order.quantity <= 0 or limit <= 0:
        return False
    try:
        return value_usd(order.quantity, limit) <= order.reserved_usd
    except ArithmeticError:  # more digits than money keeps
        return False


def check_saved_mark(ticker: str, mark: Mark) -> None:
    """A saved mark the fill rules and valuations can use, as a live price must be: NaN or inf
    failed every BUY and valuation, and 0, < 0 or 1e308 valued the position at it."""
    try:
        check_market_prices(ticker, mark.price, None, None)
    except ValueError as exc:
        raise InvalidPaperStateError(f"saved mark: {exc}") from None
    if mark.price > MAX_MAGNITUDE or mark.at_ms < 0:
        raise InvalidPaperStateError(
            f"saved mark of {ticker}: price {mark.price!r} at {mark.at_ms} is no market price"
        )


def check_saved_position(position: Position) -> None:
    """A position of a size and entry price a market has: 1E+100 BTC valued the account at
    1e102 and its SELL raised decimal.Inexact; 1E-100 BTC had an entry price of 7e102."""
    entry = position.average_entry_price
    if position.quantity > MAX_MAGNITUDE or entry > MAX_MAGNITUDE:
        raise InvalidPaperStateError(
            f"position {position.ticker}: {position.quantity} at an entry price of {entry} "
            "is no size a market trades"
        )


__all__ = ["check_saved_mark", "check_saved_position", "fills_from_reservation"]
