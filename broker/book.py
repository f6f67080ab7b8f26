"""``PaperBook``: the paper broker's orders and ledger, with no clock, file or bus.

What placing, selling and filling make of an order is in ``broker.order_outcomes``; the book keeps
the order index, the marks and the ledger and applies those outcomes.

Callers pass the time in. Everything is synchronous and in exact units, so the book can be driven
by a property test through thousands of operations; ``broker.paper.PaperBroker`` wraps it with the
clock, persistence, events and the async Broker port.
"""

from __future__ import annotations

import decimal
import logging
from collections import deque
from collections.abc import Iterable, Mapping
from decimal import Decimal

from broker.fills import PaperTerms, buy_limit_trades_through, check_market_prices
from broker.ids import client_order_id
from broker.ledger import WIDE, Ledger, LedgerError, to_decimal
from broker.order_outcomes import filled_buy, market_sell, placed_buy
from broker.orders import NO_UPDATE, BookUpdate, Fill, Mark, PaperOrder
from broker.paper_store import InvalidPaperStateError, PaperBookDocument
from broker.port import Action, OrderIntent
from broker.saved_book import check_saved_mark, check_saved_position, fills_from_reservation

#: ``Mark(price, at_ms)`` without the named tuple's ``__new__`` (a Python-level call; a mark is
#: made for every ticker at every instant of a replay)
_new_tuple = tuple.__new__

log = logging.getLogger(__name__)


class PaperBook:
    def __init__(
        self,
        terms: PaperTerms,
        ledger: Ledger,
        orders: Iterable[PaperOrder] = (),
        marks: Mapping[str, Mark] | None = None,
    ) -> None:
        self.terms = terms
        self._ledger = ledger
        self._orders: dict[str, PaperOrder] = {}  # placement order
        self._open: dict[str, dict[str, None]] = {}  # ticker -> ordered set of open order ids
        self._finished: deque[str] = deque()  # finished order ids, oldest first
        self._marks: dict[str, Mark] = dict(marks or {})
        #: bumped by every change worth saving (market prices alone are not)
        self.revision = 0
        #: ``opening_buy`` answers at ``_opening_revision`` (the tracker and every snapshot ask)
        self._opening: dict[tuple[str, int], PaperOrder | None] = {}
        self._opening_revision = -1
        finished: list[PaperOrder] = []
        for order in orders:
            if order.client_order_id in self._orders:
                raise InvalidPaperStateError(f"order {order.client_order_id} appears twice")
            self._orders[order.client_order_id] = order
            if order.is_open:
                self._open.setdefault(order.ticker, {})[order.client_order_id] = None
            else:
                finished.append(order)
        finished.sort(key=lambda o: o.updated_at_ms)
        self._finished.extend(o.client_order_id for o in finished)

    # ---- construction and persistence

    @classmethod
    def from_document(cls, document: PaperBookDocument, terms: PaperTerms) -> PaperBook:
        """The book a saved document describes, after checking it is consistent."""
        try:
            document.ledger.check_consistent()
        except LedgerError as exc:
            raise InvalidPaperStateError(str(exc)) from None
        except ArithmeticError:  # the decimal context's traps: their message names no field
            raise InvalidPaperStateError(
                f"an amount of the ledger has more digits than the {WIDE.prec} it keeps exactly"
            ) from None
        for ticker, mark in document.marks.items():
            check_saved_mark(ticker, mark)
        for position in document.ledger.positions.values():
            check_saved_position(position)
        book = cls(terms, document.ledger, document.orders, document.marks)
        book._check_open_orders()
        return book

    def to_document(self, saved_at_ms: int) -> PaperBookDocument:
        return PaperBookDocument(
            saved_at_ms=max(0, saved_at_ms),
            ledger=self._ledger,
            orders=tuple(self._orders.values()),
            marks=dict(self._marks),
        )

    def _check_open_orders(self) -> None:
        open_orders = self.open_orders()
        for order in open_orders:
            if order.side != "buy" or order.limit_price is None or order.expires_at_ms is None:
                raise InvalidPaperStateError(
                    f"open order {order.client_order_id} is not a BUY limit with an expiry"
                )
            if not fills_from_reservation(order, order.limit_price):
                raise InvalidPaperStateError(
                    f"open order {order.client_order_id} cannot fill from its reservation: "
                    f"quantity {order.quantity} (filled {order.filled_quantity}) at "
                    f"{order.limit_price} for {order.reserved_usd} USD reserved"
                )
        with_reserved = sum((o.reserved_usd for o in open_orders), Decimal(0))
        if with_reserved != self._ledger.reserved_usd:
            raise InvalidPaperStateError(
                f"open orders reserve {with_reserved} USD but the ledger holds "
                f"{self._ledger.reserved_usd} USD reserved"
            )

    # ---- reading

    @property
    def ledger(self) -> Ledger:
        return self._ledger

    def order(self, client_order_id: str) -> PaperOrder | None:
        return self._orders.get(client_order_id)

    def orders(self) -> tuple[PaperOrder, ...]:
        return tuple(self._orders.values())

    def opening_buy(self, ticker: str, opened_at_ms: int) -> PaperOrder | None:
        """The filled BUY that opened ``ticker``'s position at ``opened_at_ms``: the first one
        updated since. Remembered until the orders change (every change bumps ``revision``)."""
        if self._opening_revision != self.revision:
            self._opening.clear()
            self._opening_revision = self.revision
        key = (ticker, opened_at_ms)
        if key not in self._opening:
            self._opening[key] = self._first_buy_filled_since(ticker, opened_at_ms)
        return self._opening[key]

    def _first_buy_filled_since(self, ticker: str, opened_at_ms: int) -> PaperOrder | None:
        fills = [
            o
            for o in self._orders.values()
            if o.ticker == ticker
            and o.side == "buy"
            and o.filled_quantity > 0
            and o.updated_at_ms >= opened_at_ms
        ]
        return min(fills, key=lambda o: o.updated_at_ms, default=None)

    def open_orders(self) -> list[PaperOrder]:
        return [self._orders[cid] for ids in self._open.values() for cid in ids]

    def mark(self, ticker: str) -> Mark | None:
        return self._marks.get(ticker)

    @property
    def marks(self) -> Mapping[str, Mark]:
        return self._marks

    def portfolio_value_usd(self) -> Decimal:
        """Cash + reserved + each position at its last market price (at cost until one is seen)."""
        with decimal.localcontext(WIDE):
            total = self._ledger.cash_usd + self._ledger.reserved_usd
            for ticker, position in self._ledger.positions.items():
                mark = self._marks.get(ticker)
                total += (
                    position.cost_basis_usd
                    if mark is None
                    else position.quantity * to_decimal(mark.price)
                )
            return total

    # ---- orders

    def execute(self, intent: OrderIntent, now_ms: int) -> tuple[PaperOrder, tuple[Fill, ...]]:
        """Place (BUY) or fill (SELL) one intent. The same intent again returns the first order."""
        cid = client_order_id(intent.decision_id, intent.ticker, intent.action)
        existing = self._orders.get(cid)
        if existing is not None:
            log.info("paper: %s already executed (%s); not placed again", cid, existing.status)
            return existing, ()
        base = PaperOrder(
            client_order_id=cid,
            decision_id=intent.decision_id,
            ticker=intent.ticker,
            side="buy" if intent.action is Action.BUY else "sell",
            status="open",
            requested_notional_usd=to_decimal(intent.notional_usd),
            reference_price=to_decimal(intent.reference_price),
            placed_at_ms=now_ms,
            updated_at_ms=now_ms,
            signal_weights=dict(intent.signal_weights),
            regime=intent.regime,
        )
        if base.side == "buy":
            return self._place_buy(base), ()
        return self._sell(base, now_ms)

    def _place_buy(self, order: PaperOrder) -> PaperOrder:
        outcome = placed_buy(order, self._ledger, self.terms, self._marks.get(order.ticker))
        if isinstance(outcome, str):
            return self._reject(order, outcome)
        self._ledger, placed = outcome
        self._add(placed)
        log.info(
            "paper: %s BUY %s %s limit %s placed",
            placed.client_order_id,
            placed.quantity,
            order.ticker,
            placed.limit_price,
        )
        return placed

    def _sell(self, order: PaperOrder, now_ms: int) -> tuple[PaperOrder, tuple[Fill, ...]]:
        outcome = market_sell(
            order, self._ledger, self._marks.get(order.ticker), now_ms, self.terms
        )
        if isinstance(outcome, str):
            return self._reject(order, outcome), ()
        self._ledger, filled = outcome
        self._add(filled)
        log.info(
            "paper: %s SELL %s %s filled at %s",
            filled.client_order_id,
            filled.quantity,
            order.ticker,
            filled.average_price,
        )
        return filled, (self._fill_of(filled, opened=False),)

    def _reject(self, order: PaperOrder, reason: str) -> PaperOrder:
        rejected = order.model_copy(update={"status": "rejected", "reason": reason})
        self._add(rejected)
        log.warning(
            "paper: %s %s %s rejected: %s",
            rejected.client_order_id,
            order.side.upper(),
            order.ticker,
            reason,
        )
        return rejected

    def cancel(self, client_order_id: str, now_ms: int) -> PaperOrder | None:
        """Cancel an open order, releasing its cash; a finished order is returned unchanged."""
        order = self._orders.get(client_order_id)
        if order is None or not order.is_open:
            return order
        return self._close_unfilled(order, now_ms, "cancelled by request")

    def expire_due(self, now_ms: int) -> tuple[PaperOrder, ...]:
        """Cancel every open order whose time to live is over at ``now_ms``."""
        if not self._open:
            return ()
        due = [
            o
            for o in self.open_orders()
            if o.expires_at_ms is not None and o.expires_at_ms <= now_ms
        ]
        return tuple(
            self._close_unfilled(
                o, now_ms, f"expired: unfilled {self.terms.limit_ttl_secs:g} s after it was placed"
            )
            for o in due
        )

    def _close_unfilled(self, order: PaperOrder, now_ms: int, reason: str) -> PaperOrder:
        ledger = self._ledger.release(order.reserved_usd)
        closed = order.model_copy(
            update={
                "status": "cancelled",
                "reserved_usd": Decimal(0),
                "reason": reason,
                "updated_at_ms": max(now_ms, order.placed_at_ms),
            }
        )
        self._ledger = ledger
        self._replace(closed)
        log.info("paper: %s %s", closed.client_order_id, reason)
        return closed

    # ---- the market

    def on_market(
        self,
        ticker: str,
        price: float,
        *,
        low: float | None = None,
        high: float | None = None,
        at_ms: int,
    ) -> BookUpdate:
        """The market traded at ``price`` (and across ``[low, high]``) up to ``at_ms``.

        ``low``/``high`` must be the extremes traded since the previous update for this ticker
        (not a whole candle's, which may predate an order: see ``broker.traded_range``).
        Marks the ticker, expires orders that are due, fills BUY limits the market traded through.
        """
        check_market_prices(ticker, price, low, high)
        self.mark_market(ticker, price, at_ms)
        expired = self.expire_due(at_ms)
        waiting = self._open.get(ticker)
        if not waiting:
            return BookUpdate(expired=expired) if expired else NO_UPDATE
        price_d = to_decimal(price)
        low_d = None if low is None else to_decimal(low)
        candidates = [self._orders[cid] for cid in waiting]  # filling changes ``waiting``
        fills = [
            self._fill_buy(order, at_ms)
            for order in candidates
            # trading reported at or before the placement happened before the order existed
            if order.placed_at_ms < at_ms
            and order.limit_price is not None
            and buy_limit_trades_through(order.limit_price, price_d, low_d)
        ]
        return BookUpdate(fills=tuple(fills), expired=expired)

    @property
    def has_open_orders(self) -> bool:
        return bool(self._open)

    def mark_market(self, ticker: str, price: float, at_ms: int) -> None:
        """The marking part of ``on_market`` (``price`` already checked): all a market update
        does while no order is open. An older update leaves the mark; an equal one keeps it (the
        streams of a ticker push the same price at one instant: no new tuple for those)."""
        last = self._marks.get(ticker)
        if last is None or at_ms > last.at_ms or (at_ms == last.at_ms and price != last.price):
            self._marks[ticker] = _new_tuple(Mark, (price, at_ms))

    def _fill_buy(self, order: PaperOrder, at_ms: int) -> Fill:
        opened = order.ticker not in self._ledger.positions
        self._ledger, filled = filled_buy(order, self._ledger, at_ms)
        self._replace(filled)
        log.info(
            "paper: %s BUY %s %s filled at %s",
            filled.client_order_id,
            order.quantity,
            order.ticker,
            order.limit_price,
        )
        return self._fill_of(filled, opened=opened)

    def _fill_of(self, order: PaperOrder, *, opened: bool) -> Fill:
        position = self._ledger.positions.get(order.ticker)
        return Fill(
            order=order,
            opened_position=opened,
            position_quantity=Decimal(0) if position is None else position.quantity,
            position_entry_price=None if position is None else position.average_entry_price,
        )

    # ---- bookkeeping of the order index

    def _add(self, order: PaperOrder) -> None:
        self._orders[order.client_order_id] = order
        if order.is_open:
            self._open.setdefault(order.ticker, {})[order.client_order_id] = None
        else:
            self._finished.append(order.client_order_id)
            self._trim()
        self.revision += 1

    def _replace(self, order: PaperOrder) -> None:
        """An open order finished (filled, cancelled, expired)."""
        self._orders[order.client_order_id] = order
        waiting = self._open.get(order.ticker, {})
        waiting.pop(order.client_order_id, None)
        if not waiting:
            self._open.pop(order.ticker, None)
        self._finished.append(order.client_order_id)
        self._trim()
        self.revision += 1

    def _trim(self) -> None:
        while len(self._finished) > self.terms.history_limit:
            self._orders.pop(self._finished.popleft(), None)
