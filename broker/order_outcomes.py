"""What placing a BUY, selling and filling a BUY make of a paper order and the ledger.

Pure functions of the order, the ledger, the terms and the mark: ``broker.book.PaperBook`` keeps
the order index and applies what these return (the new ledger and order, or why it is rejected).
"""

from __future__ import annotations

from decimal import Decimal

from broker.fills import (
    PaperTerms,
    fee_usd,
    market_sell_price,
    outside_price_band,
    quantity_for,
    value_usd,
)
from broker.ledger import InsufficientCashError, Ledger, to_decimal
from broker.orders import Mark, PaperOrder


def placed_buy(
    order: PaperOrder, ledger: Ledger, terms: PaperTerms, mark: Mark | None
) -> tuple[Ledger, PaperOrder] | str:
    """The resting BUY limit at the reference price and the ledger with its cash reserved; or
    why it is rejected (outside the price band of ``mark``, the last market price, among
    others)."""
    limit = order.reference_price
    if mark is not None:
        refusal = outside_price_band(limit, to_decimal(mark.price), terms.price_band_pct)
        if refusal is not None:
            return refusal
    step = terms.step_for(order.ticker)
    quantity = quantity_for(order.requested_notional_usd, limit, step)
    cost = value_usd(quantity, limit)
    if quantity <= 0 or cost <= 0:
        return (
            f"quantity rounds to zero: {order.requested_notional_usd} USD at {limit} "
            f"buys less than one step of {step}"
        )
    reserve = cost + fee_usd(cost, terms.maker_fee_pct)
    try:
        ledger = ledger.reserve(reserve)
    except InsufficientCashError as exc:
        return str(exc)
    placed = order.model_copy(
        update={
            "limit_price": limit,
            "quantity": quantity,
            "reserved_usd": reserve,
            "expires_at_ms": order.placed_at_ms + terms.limit_ttl_ms,
            "reason": f"resting BUY limit at {limit}",
        }
    )
    return ledger, placed


def market_sell(
    order: PaperOrder, ledger: Ledger, mark: Mark | None, now_ms: int, terms: PaperTerms
) -> tuple[Ledger, PaperOrder] | str:
    """The SELL filled at the mark less slippage and the ledger after it; or why it is rejected
    (no position, no recent price, a quantity that rounds to zero)."""
    held = ledger.positions.get(order.ticker)
    if held is None:
        return "no position"
    if mark is None or now_ms - mark.at_ms > terms.max_price_age_ms:
        seen = "none seen" if mark is None else f"last at {mark.at_ms}"
        return (
            f"no market price for {order.ticker} in the last "
            f"{terms.max_price_age_secs:g} s ({seen})"
        )
    quantity = sell_quantity(order, held.quantity, terms)
    if quantity <= 0:
        return "quantity rounds to zero"
    price = market_sell_price(to_decimal(mark.price), terms.slippage_pct)
    proceeds = value_usd(quantity, price)
    fee = fee_usd(proceeds, terms.taker_fee_pct)
    ledger, closed_basis = ledger.settle_sell(
        order.ticker, quantity=quantity, proceeds_usd=proceeds, fee_usd=fee
    )
    filled = order.model_copy(
        update={
            "status": "filled",
            "quantity": quantity,
            "filled_quantity": quantity,
            "average_price": price,
            "fee_usd": fee,
            "closed_cost_basis_usd": closed_basis,
            "realised_pnl_usd": proceeds - closed_basis,
            "reason": "market SELL" + ("" if quantity == held.quantity else " (partial)"),
        }
    )
    return ledger, filled


def sell_quantity(order: PaperOrder, held: Decimal, terms: PaperTerms) -> Decimal:
    """All of the position, unless the intent clearly asks for less (see full_close_fraction)."""
    asked = quantity_for(
        order.requested_notional_usd, order.reference_price, terms.step_for(order.ticker)
    )
    return held if asked >= held * terms.full_close_fraction else asked


def filled_buy(order: PaperOrder, ledger: Ledger, at_ms: int) -> tuple[Ledger, PaperOrder]:
    """The open BUY limit filled at its limit (the market traded through it) and the ledger
    after it."""
    assert order.limit_price is not None  # open orders are BUY limits (checked on load)
    cost = value_usd(order.quantity, order.limit_price)
    # the fee is the one reserved at placement: the terms an order was placed under hold
    fee = order.reserved_usd - cost
    ledger = ledger.settle_buy(
        order.ticker,
        reserved_usd=order.reserved_usd,
        quantity=order.quantity,
        cost_usd=cost,
        fee_usd=fee,
        at_ms=at_ms,
    )
    filled = order.model_copy(
        update={
            "status": "filled",
            "filled_quantity": order.quantity,
            "average_price": order.limit_price,
            "fee_usd": fee,
            "reserved_usd": Decimal(0),
            "reason": "BUY limit filled: the market traded through it",
            "updated_at_ms": at_ms,
        }
    )
    return ledger, filled
