"""What the Broker contract suite (``contract.broker_contract``) runs against: the harness a test
module builds (a fresh broker and a ``MarketDriver`` that moves its market), and the intents it
places (``make_intent``, also used by the brokers' own tests).
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from broker.port import Action, Broker, OrderIntent, PositionDetail


class MarketDriver(Protocol):
    """Moves the market a broker under test trades on."""

    async def price(self, ticker: str) -> float:
        """Where ``ticker`` trades now."""
        ...

    async def trade(self, ticker: str, *, low: float, high: float, close: float) -> None:
        """Make ``ticker`` trade across ``[low, high]``, ending at ``close``, after every order
        placed so far; return once the broker has seen it (fills done, marks updated)."""
        ...


@dataclass(frozen=True)
class BrokerHarness:
    broker: Broker
    market: MarketDriver
    ticker: str  # the ticker the suite trades
    other_ticker: str  # a second one, for orders that must not interfere
    starting_cash_usd: float
    maker_fee_pct: float  # percent: 0.02 means 0.02 %
    taker_fee_pct: float
    slippage_pct: float
    quantity_step: float  # of ``ticker``: a filled quantity is notional / price rounded down to it
    order_notional_usd: float = 1_000.0  # comfortably above minimums, well below the cash
    money_tolerance_usd: float = 1e-6  # for amounts the port reports as floats
    price_rel_tolerance: float = 1e-9
    #: lets time pass beyond a resting BUY's time to live; None when BUY limits are good till
    #: cancelled (the ccxt broker's GTC orders)
    outlive_order_ttl: Callable[[], Awaitable[None]] | None = None


_decision_ids = itertools.count(1)


def make_intent(
    ticker: str,
    action: Action,
    *,
    notional_usd: float,
    reference_price: float,
    decision_id: str | None = None,
    signal_weights: dict[str, float] | None = None,
) -> OrderIntent:
    """An intent as the risk caps produce it; a fresh decision id unless one is given."""
    return OrderIntent(
        decision_id=decision_id or f"contract-{next(_decision_ids)}",
        ticker=ticker,
        action=action,
        notional_usd=notional_usd,
        reference_price=reference_price,
        position_pct=0.1 if action is Action.BUY else 0.0,
        signal_weights=signal_weights or {},
    )


def position_of(positions: Sequence[PositionDetail], ticker: str) -> PositionDetail | None:
    found = [p for p in positions if p.ticker == ticker]
    assert len(found) <= 1, f"two positions reported for {ticker}: {found}"
    return found[0] if found else None
