"""The simulator's matching engine and USDⓈ-M account: pure logic, no I/O (the routes are sim.orders).

One cross-margined USDT account in one-way mode (``positionSide`` BOTH), a fixed leverage for every
symbol (1x by default, so margin equals notional, like cash). The rules, chosen to match the paper
broker's (the broker contract holds for both):

- MARKET fills at once at the current price moved against the taker by ``slippage_pct``, paying
  ``taker_fee_pct``.
- LIMIT GTC rests until the market trades STRICTLY through it (a touch does not fill: the queue ahead
  of us is assumed to absorb it), then fills whole at the limit paying ``maker_fee_pct``. A limit
  already through the current price is marketable: it fills at once as a taker at the better of the
  limit and the slipped price.
- Margin: a new order that adds exposure needs ``qty * price / leverage`` plus the fee it will pay
  of available balance (-2019 otherwise), ``price`` being the worst it can fill at (the limit, or
  the slipped market price); open orders hold that until they fill or are cancelled.
- ``availableBalance = wallet + unrealized PnL - position margin (at mark) - open order margin``,
  ``totalMarginBalance = wallet + unrealized PnL``: Binance's cross-margin definitions.
- reduceOnly: the quantity is clipped to the position; without an opposite position -2022.
- Client order ids are unique among OPEN orders (Binance's documented rule): -4116 otherwise.
- PERCENT_PRICE (as exchangeInfo lists it): a LIMIT above the current price x 1.05 is refused with
  -4016, below it x 0.95 with -4024, edges allowed (compared exactly, not in floats).

Prices come from ``price_of(ticker)`` (the recorded feed at sim now) unless a test has pinned a
ticker with ``trade()``. Resting orders are matched against each ``trade()`` range and, for the feed,
against the price seen on every ``sweep()`` (the order routes sweep before answering), so intra-bar
extremes between two requests are not seen by a resting order: conservative for our fills.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field

Side = Literal["BUY", "SELL"]
OrderType = Literal["LIMIT", "MARKET"]
Status = Literal["NEW", "FILLED", "CANCELED"]

_EPS: Final = 1e-12
#: the PERCENT_PRICE filter's multipliers (exchangeInfo serves them as written here)
PERCENT_PRICE_UP: Final = "1.0500"
PERCENT_PRICE_DOWN: Final = "0.9500"


def _marketable(side: Side, limit: float, market: float) -> bool:
    return limit > market if side == "BUY" else limit < market


def _check_percent_price(limit: float, market: float) -> None:
    """Binance's PERCENT_PRICE filter against the current price (the sim's mark price)."""
    if Fraction(limit) > Fraction(market) * Fraction(PERCENT_PRICE_UP):
        raise OrderRejected(-4016, "Price is higher than mark price multiplier cap.")
    if Fraction(limit) < Fraction(market) * Fraction(PERCENT_PRICE_DOWN):
        raise OrderRejected(-4024, "Price is lower than mark price multiplier floor.")


class OrderRejected(Exception):
    """Binance's error answer for an order request: ``code`` and ``msg``, HTTP 400."""

    def __init__(self, code: int, msg: str) -> None:
        super().__init__(msg)
        self.code, self.msg = code, msg


class SimAccountConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    starting_balance_usd: float = Field(10_000.0, ge=0)
    leverage: int = Field(1, ge=1, le=125)
    maker_fee_pct: float = Field(0.02, ge=0)
    taker_fee_pct: float = Field(0.05, ge=0)
    slippage_pct: float = Field(0.05, ge=0)


@dataclass
class SimOrder:
    order_id: int
    client_order_id: str
    symbol: str
    ticker: str
    side: Side
    type: OrderType
    quantity: float
    price: float  # limit price; 0 for MARKET
    reduce_only: bool
    time_ms: int
    status: Status = "NEW"
    executed_qty: float = 0.0
    avg_price: float = 0.0
    update_time_ms: int = 0
    margin_held_usd: float = 0.0


@dataclass(frozen=True)
class SimTrade:
    trade_id: int
    order_id: int
    symbol: str
    side: Side
    price: float
    qty: float
    realized_pnl_usd: float
    commission_usd: float
    maker: bool
    time_ms: int


@dataclass
class SimPosition:
    amount: float = 0.0  # signed base units (one-way mode)
    entry_price: float = 0.0
    update_time_ms: int = 0


@dataclass
class _Account:
    wallet_usd: float
    orders: dict[int, SimOrder] = field(default_factory=dict)
    trades: list[SimTrade] = field(default_factory=list)
    positions: dict[str, SimPosition] = field(default_factory=dict)


class OrderBook:
    """Orders, fills, positions and balances of the sim's one account."""

    def __init__(
        self,
        symbols: dict[str, str],  # Binance symbol -> ticker
        price_of: Callable[[str], float | None],
        now_ms: Callable[[], int],
        config: SimAccountConfig | None = None,
    ) -> None:
        self._symbols = dict(symbols)
        self._feed_price = price_of
        self._now_ms = now_ms
        self._pinned: dict[str, float] = {}
        self._ids = itertools.count(1)
        self.config = config or SimAccountConfig()
        self._account = _Account(wallet_usd=self.config.starting_balance_usd)

    def reset(self, config: SimAccountConfig | None = None) -> None:
        """A fresh account (no orders, positions or pinned prices) under ``config``."""
        self.config = config or self.config
        self._account = _Account(wallet_usd=self.config.starting_balance_usd)
        self._pinned.clear()

    # -- market --------------------------------------------------------------------------------

    def ticker_of(self, symbol: str) -> str:
        ticker = self._symbols.get(symbol)
        if ticker is None:
            raise OrderRejected(-1121, "Invalid symbol.")
        return ticker

    def price(self, ticker: str) -> float:
        pinned = self._pinned.get(ticker)
        if pinned is not None:
            return pinned
        price = self._feed_price(ticker)
        if price is None:
            raise OrderRejected(-1020, f"no recorded price for {ticker} at sim now")
        return price

    def trade(self, ticker: str, *, low: float, high: float, close: float) -> None:
        """Test control: ``ticker`` trades across ``[low, high]`` and stays pinned at ``close``."""
        if not low <= close <= high:
            raise ValueError(f"close {close} outside [{low}, {high}]")
        self._pinned[ticker] = close
        self._match(ticker, low, high)

    def sweep(self) -> None:
        """Match resting orders of unpinned tickers against the feed's current price."""
        for ticker in {o.ticker for o in self.open_orders(None)} - set(self._pinned):
            price = self._feed_price(ticker)
            if price is not None:
                self._match(ticker, price, price)

    def _match(self, ticker: str, low: float, high: float) -> None:
        for order in sorted(self.open_orders(None), key=lambda o: o.order_id):
            if order.ticker != ticker or order.type != "LIMIT":
                continue
            through = low < order.price if order.side == "BUY" else high > order.price
            if through:
                self._fill(order, order.price, maker=True)

    # -- orders --------------------------------------------------------------------------------

    def place(
        self,
        *,
        symbol: str,
        side: Side,
        order_type: OrderType,
        quantity: float,
        price: float | None,
        client_order_id: str,
        reduce_only: bool,
    ) -> SimOrder:
        ticker = self.ticker_of(symbol)
        if quantity <= 0:
            raise OrderRejected(-4003, "Quantity less than or equal to zero.")
        if order_type == "LIMIT" and (price is None or price <= 0):
            raise OrderRejected(-4001, "Price less than 0.")
        if any(o.client_order_id == client_order_id for o in self.open_orders(None)):
            raise OrderRejected(-4116, "ClientOrderId is duplicated.")
        position = self._position(symbol)
        if reduce_only:
            closes = -position.amount if side == "BUY" else position.amount
            if closes <= _EPS:
                raise OrderRejected(-2022, "ReduceOnly Order is rejected.")
            quantity = min(quantity, closes)
        market = self.price(ticker)
        if order_type == "LIMIT" and price is not None:
            _check_percent_price(price, market)
        slipped = self._slipped(market, side)
        resting = (
            order_type == "LIMIT" and price is not None and not _marketable(side, price, market)
        )
        # the worst price it can fill at, plus the fee it will pay: a fill never overdraws
        margin_price = price if resting and price is not None else slipped
        fee_pct = self.config.maker_fee_pct if resting else self.config.taker_fee_pct
        fee_held = quantity * margin_price * fee_pct / 100
        margin = 0.0 if reduce_only else quantity * margin_price / self.config.leverage + fee_held
        if margin > self.available_usd() + _EPS:
            raise OrderRejected(-2019, "Margin is insufficient.")
        now = self._now_ms()
        order = SimOrder(
            order_id=next(self._ids),
            client_order_id=client_order_id,
            symbol=symbol,
            ticker=ticker,
            side=side,
            type=order_type,
            quantity=quantity,
            price=price or 0.0,
            reduce_only=reduce_only,
            time_ms=now,
            update_time_ms=now,
            margin_held_usd=margin,
        )
        self._account.orders[order.order_id] = order
        if order_type == "MARKET":
            self._fill(order, slipped, maker=False)
        elif not resting:
            better = min(order.price, slipped) if side == "BUY" else max(order.price, slipped)
            self._fill(order, better, maker=False)
        return order

    def cancel(self, order: SimOrder) -> SimOrder:
        if order.status != "NEW":
            raise OrderRejected(-2011, "Unknown order sent.")
        order.status = "CANCELED"
        order.margin_held_usd = 0.0
        order.update_time_ms = self._now_ms()
        return order

    def find(self, symbol: str, order_id: int | None, client_order_id: str | None) -> SimOrder:
        """By order id, else the latest order with that client id; -2013 when there is none."""
        for order in reversed(list(self._account.orders.values())):
            if order.symbol != symbol:
                continue
            if order_id is not None and order.order_id == order_id:
                return order
            if order_id is None and order.client_order_id == client_order_id:
                return order
        raise OrderRejected(-2013, "Order does not exist.")

    def open_orders(self, symbol: str | None) -> list[SimOrder]:
        return [
            o
            for o in self._account.orders.values()
            if o.status == "NEW" and (symbol is None or o.symbol == symbol)
        ]

    def trades(self, symbol: str, order_id: int | None) -> list[SimTrade]:
        return [
            t
            for t in self._account.trades
            if t.symbol == symbol and (order_id is None or t.order_id == order_id)
        ]

    def _slipped(self, price: float, side: Side) -> float:
        move = self.config.slippage_pct / 100
        return price * (1 + move) if side == "BUY" else price * (1 - move)

    def _fill(self, order: SimOrder, price: float, *, maker: bool) -> None:
        now = self._now_ms()
        qty = order.quantity
        signed = qty if order.side == "BUY" else -qty
        position = self._position(order.symbol)
        realized = 0.0
        if position.amount * signed < 0:  # reduces (or flips) the position
            closed = min(abs(signed), abs(position.amount))
            direction = 1.0 if position.amount > 0 else -1.0
            realized = closed * (price - position.entry_price) * direction
        new_amount = position.amount + signed
        if abs(new_amount) <= _EPS:
            position.amount, position.entry_price = 0.0, 0.0
        elif position.amount * signed >= 0:  # opens or adds: weighted entry
            total = abs(position.amount) + qty
            position.entry_price = (abs(position.amount) * position.entry_price + qty * price) / (
                total
            )
            position.amount = new_amount
        elif new_amount * position.amount < 0:  # flipped: the rest opens at the fill price
            position.amount, position.entry_price = new_amount, price
        else:
            position.amount = new_amount
        position.update_time_ms = now
        fee_pct = self.config.maker_fee_pct if maker else self.config.taker_fee_pct
        commission = qty * price * fee_pct / 100
        self._account.wallet_usd += realized - commission
        order.status, order.executed_qty, order.avg_price = "FILLED", qty, price
        order.update_time_ms, order.margin_held_usd = now, 0.0
        self._account.trades.append(
            SimTrade(
                trade_id=next(self._ids),
                order_id=order.order_id,
                symbol=order.symbol,
                side=order.side,
                price=price,
                qty=qty,
                realized_pnl_usd=realized,
                commission_usd=commission,
                maker=maker,
                time_ms=now,
            )
        )

    # -- account -------------------------------------------------------------------------------

    def _position(self, symbol: str) -> SimPosition:
        return self._account.positions.setdefault(symbol, SimPosition())

    def positions(self) -> Iterable[tuple[str, SimPosition]]:
        return list(self._account.positions.items())

    def wallet_usd(self) -> float:
        return self._account.wallet_usd

    def unrealized_usd(self, symbol: str) -> float:
        position = self._position(symbol)
        if position.amount == 0.0:
            return 0.0
        return position.amount * (self.price(self.ticker_of(symbol)) - position.entry_price)

    def position_margin_usd(self, symbol: str) -> float:
        position = self._position(symbol)
        mark = self.price(self.ticker_of(symbol)) if position.amount else 0.0
        return abs(position.amount) * mark / self.config.leverage

    def open_order_margin_usd(self) -> float:
        return sum(o.margin_held_usd for o in self.open_orders(None))

    def margin_balance_usd(self) -> float:
        symbols = [s for s, p in self.positions() if p.amount]
        return self.wallet_usd() + sum(self.unrealized_usd(s) for s in symbols)

    def available_usd(self) -> float:
        symbols = [s for s, p in self.positions() if p.amount]
        position_margin = sum(self.position_margin_usd(s) for s in symbols)
        return self.margin_balance_usd() - position_margin - self.open_order_margin_usd()
