"""The paper broker's terms (fees, slippage, order life, quantity steps) and its fill rules.

Rules, all pure:

- a BUY is a limit order at the intent's reference price; it fills only when the market trades
  THROUGH the limit (a later price or low strictly below it), at the limit price, as a maker;
- a SELL is a market order, filled at the current price minus ``slippage_pct``, as a taker;
- quantities are rounded DOWN to the ticker's quantity step, so an order never costs more than
  the notional asked for;
- a BUY limit more than ``price_band_pct`` from the last market price is refused, as Binance's
  PERCENT_PRICE filter refuses it (an absurd limit would otherwise rest with cash reserved, or
  fill far above the market on the next tick).
"""

from __future__ import annotations

import decimal
import math
from decimal import Decimal
from typing import Final

from pydantic import BaseModel, ConfigDict, Field

from broker.ledger import WIDE, money

_FLOOR: Final = decimal.Context(
    prec=60, rounding=decimal.ROUND_FLOOR, traps=[decimal.InvalidOperation]
)
_HUNDRED: Final = Decimal(100)


class PaperTerms(BaseModel):
    """Configuration of the paper broker. Percentages are percent: 0.02 means 0.02 %."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    maker_fee_pct: Decimal = Field(Decimal("0.02"), ge=0, lt=100)
    taker_fee_pct: Decimal = Field(Decimal("0.05"), ge=0, lt=100)
    slippage_pct: Decimal = Field(Decimal("0.05"), ge=0, lt=100)
    #: an unfilled BUY limit is cancelled (expired) this long after it was placed
    limit_ttl_secs: float = Field(900.0, gt=0)
    quantity_step: Decimal = Field(Decimal("0.000001"), gt=0)
    quantity_steps: dict[str, Decimal] = Field(default_factory=dict)  # per ticker, overrides
    #: a SELL needs a market price at most this old (market time vs the broker's clock)
    max_price_age_secs: float = Field(300.0, gt=0)
    #: a SELL asking for at least this share of the position closes all of it (no dust left
    #: behind because the decider valued the position at a slightly different price)
    full_close_fraction: Decimal = Field(Decimal("0.95"), gt=0, le=1)
    #: finished orders kept for idempotency and lookup (open orders are always kept)
    history_limit: int = Field(1000, ge=1)
    #: a BUY limit must lie within this many percent of the last market price, edges included:
    #: Binance's PERCENT_PRICE filter, multipliers 1.05 / 0.95 on the perpetuals the simulator
    #: serves (its exchangeInfo); without a market price seen yet there is nothing to check
    price_band_pct: Decimal = Field(Decimal("5"), gt=0, lt=100)

    def step_for(self, ticker: str) -> Decimal:
        return self.quantity_steps.get(ticker, self.quantity_step)

    @property
    def limit_ttl_ms(self) -> int:
        return round(self.limit_ttl_secs * 1000)

    @property
    def max_price_age_ms(self) -> int:
        return round(self.max_price_age_secs * 1000)


def floor_to_step(quantity: Decimal, step: Decimal) -> Decimal:
    """The largest whole number of ``step`` not above ``quantity`` (never negative)."""
    if quantity <= 0:
        return Decimal(0)
    steps = _FLOOR.divide(quantity, step).to_integral_value(rounding=decimal.ROUND_FLOOR)
    return WIDE.multiply(steps, step)


def quantity_for(notional_usd: Decimal, price: Decimal, step: Decimal) -> Decimal:
    """How much ``notional_usd`` buys at ``price``, rounded down to ``step``."""
    return floor_to_step(_FLOOR.divide(notional_usd, price), step)


def buy_limit_trades_through(limit_price: Decimal, price: Decimal, low: Decimal | None) -> bool:
    """True when the market traded strictly below the limit; touching it is not enough."""
    lowest = price if low is None else min(price, low)
    return lowest < limit_price


#: how a refusal by the percent-price band starts (the filter's name on Binance)
PERCENT_PRICE_REFUSAL: Final = "PERCENT_PRICE"


def outside_price_band(limit: Decimal, last: Decimal, band_pct: Decimal) -> str | None:
    """Why a limit at ``limit`` is refused with the market last at ``last``: more than
    ``band_pct`` percent away from it (None: within the band, edges included)."""
    share = WIDE.divide(band_pct, _HUNDRED)
    low = WIDE.multiply(last, WIDE.subtract(Decimal(1), share))
    high = WIDE.multiply(last, WIDE.add(Decimal(1), share))
    if low <= limit <= high:
        return None
    return (
        f"{PERCENT_PRICE_REFUSAL}: limit {limit} is outside {low} .. {high}, "
        f"{band_pct} % either side of the last price {last}"
    )


def value_usd(quantity: Decimal, price: Decimal) -> Decimal:
    return money(WIDE.multiply(quantity, price))


def fee_usd(amount_usd: Decimal, fee_pct: Decimal) -> Decimal:
    return money(WIDE.divide(WIDE.multiply(amount_usd, fee_pct), _HUNDRED))


def market_sell_price(price: Decimal, slippage_pct: Decimal) -> Decimal:
    """What a market sell gets: the price moved against the seller by the slippage."""
    return WIDE.multiply(price, WIDE.subtract(Decimal(1), WIDE.divide(slippage_pct, _HUNDRED)))


def check_market_prices(ticker: str, price: float, low: float | None, high: float | None) -> None:
    """A market update the fill rules can use: finite, > 0, and low <= price <= high."""
    for name, value in (("price", price), ("low", low), ("high", high)):
        if value is not None and not (math.isfinite(value) and value > 0):
            raise ValueError(f"{ticker} {name} must be a finite number > 0, got {value!r}")
    if (low is not None and low > price) or (high is not None and high < price):
        raise ValueError(f"{ticker}: price {price} lies outside low {low} .. high {high}")
