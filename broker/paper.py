"""``PaperBroker``: the default broker. Simulated fills on real market prices, exact accounting.

- BUY intent: a limit order at the intent's reference price for its notional (quantity rounded
  down to the ticker's step). Its cost plus maker fee is reserved at once, so two orders can never
  spend the same cash. It fills, at the limit, only when the market trades strictly below it after
  it was placed; unfilled after ``limit_ttl_secs`` it expires (cancelled, logged, cash released).
  A limit more than ``price_band_pct`` (5 %) from the last market price is rejected, reason
  starting ``PERCENT_PRICE`` (Binance's filter of that name refuses it too).
- SELL intent: a market order, long-only. It closes the whole position unless the intent's
  notional is clearly less than the position (below ``full_close_fraction`` of it, valued at the
  intent's reference price), in which case that much is sold. It fills at the last market price
  minus ``slippage_pct``, paying the taker fee, and needs a price at most ``max_price_age_secs``
  old. A SELL without a position is rejected ("no position").
- The same decision executed again (a retry, a replay after a crash) returns the first order; its
  client order id is derived from the decision (``broker.ids``).
- Every change is saved to ``state_path`` (atomic replace) BEFORE it is reported or published; if
  the save fails the change is undone and ``HaltTradingError`` raised, so the file and what the
  daemon was told never disagree. Market prices alone are not a change: they are saved with the
  next one.
- ``OrderFilled`` (and ``PositionOpened`` for a BUY that opened a position) go on the bus after the
  save. Exits and their PnL context are the tracker's (``PaperBroker.order`` has the closed cost
  basis and realised PnL of each SELL).

Market prices come in through ``on_market_price`` (or ``on_market_tick``, which turns kline pushes
into what traded between them); both are synchronous and cheap when nothing is waiting to fill.
Not thread-safe, one owner per state file.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

from broker.book import PaperBook
from broker.fills import PaperTerms, value_usd
from broker.ledger import Ledger, LedgerError, to_decimal
from broker.orders import BookUpdate, Fill, Mark, PaperOrder
from broker.paper_store import (
    InvalidPaperStateError,
    PaperBookDocument,
    read_document,
    write_document,
)
from broker.port import OpenOrder, OrderIntent, OrderResult, PositionDetail
from broker.traded_range import TradedRangeTracker
from core.bus import EventBus
from core.clock import Clock
from core.errors import HaltTradingError, RefuseToStartError
from core.events import Event, MarketTick, OrderFilled, PositionOpened
from core.unvalidated import is_float_map, require_plain, unvalidated
from state.atomic import remove_stale_tmp_files

log = logging.getLogger(__name__)

Number = float | int | str | Decimal


class PaperBroker:
    def __init__(
        self,
        clock: Clock,
        *,
        starting_cash_usd: Number = 10_000,
        maker_fee_pct: Number = "0.02",
        taker_fee_pct: Number = "0.05",
        slippage_pct: Number = "0.05",
        limit_ttl_secs: float = 900.0,
        quantity_step: Number = "0.000001",
        quantity_steps: Mapping[str, Number] | None = None,
        max_price_age_secs: float = 300.0,
        full_close_fraction: Number = "0.95",
        history_limit: int = 1000,
        price_band_pct: Number = "5",
        state_path: Path | None = None,
        durable: bool = True,
        bus: EventBus | None = None,
    ) -> None:
        """Open the paper account, resuming the one saved at ``state_path`` if there is one.

        A saved account keeps its own starting cash, positions and open orders (the terms here
        apply from now on). A state file that cannot be trusted raises ``RefuseToStartError``
        naming it, and is left untouched. ``durable=False`` saves it without fsync (a replay).
        """
        self._clock = clock
        self._bus = bus
        self._state_path = state_path
        self._durable = durable
        self.terms = PaperTerms(
            maker_fee_pct=to_decimal(maker_fee_pct),
            taker_fee_pct=to_decimal(taker_fee_pct),
            slippage_pct=to_decimal(slippage_pct),
            limit_ttl_secs=limit_ttl_secs,
            quantity_step=to_decimal(quantity_step),
            quantity_steps={t: to_decimal(s) for t, s in (quantity_steps or {}).items()},
            max_price_age_secs=max_price_age_secs,
            full_close_fraction=to_decimal(full_close_fraction),
            history_limit=history_limit,
            price_band_pct=to_decimal(price_band_pct),
        )
        self._ranges = TradedRangeTracker()
        self._ticks_failing = False
        #: market ticks that failed (logged); see ``on_market_tick``
        self.tick_failures = 0
        saved = self._load() if state_path is not None else None
        if saved is None:
            self._book = PaperBook(self.terms, Ledger.fresh(to_decimal(starting_cash_usd)))
            self._saved = self._save_initial()
        else:
            self._book, self._saved = saved
        self._saved_revision = self._book.revision

    # ---- the Broker port

    async def execute_decisions(self, intents: Sequence[OrderIntent]) -> Sequence[OrderResult]:
        self.expire_due_orders()
        results: list[OrderResult] = []
        for intent in intents:
            order, fills = self._book.execute(intent, self._clock.now_ms())
            self._commit(fills)
            results.append(order.to_result())
        return results

    async def get_positions_detail(self) -> Sequence[PositionDetail]:
        self.expire_due_orders()
        details = []
        for ticker, position in self._book.ledger.positions.items():
            mark = self._book.mark(ticker)
            entry = self._book.opening_buy(ticker, position.opened_at_ms)
            details.append(
                _position_detail(
                    {
                        "ticker": ticker,
                        "quantity": float(position.quantity),
                        "entry_price": float(position.average_entry_price),
                        "mark_price": None if mark is None else mark.price,
                        "opened_at_ms": position.opened_at_ms,
                        "signals": dict(entry.signal_weights) if entry is not None else {},
                        "regime": entry.regime if entry is not None else "",
                    }
                )
            )
        return details

    async def get_portfolio_value(self) -> float:
        """Free cash + reserved cash + every position at its last market price."""
        self.expire_due_orders()
        return float(self._book.portfolio_value_usd())

    async def get_cash(self) -> float:
        """Free cash: what is neither in positions nor reserved by open orders."""
        self.expire_due_orders()
        return float(self._book.ledger.cash_usd)

    async def get_open_orders(self) -> Sequence[OpenOrder]:
        """Resting BUY limits (after expiring those due), oldest first."""
        self.expire_due_orders()
        if not self._book.has_open_orders:  # most calls: no scan of the order history
            return []
        placed = (o for o in self._book.orders() if o.is_open)  # in the order they were placed
        return [_open_order(o) for o in sorted(placed, key=lambda o: o.placed_at_ms)]

    async def cancel(self, client_order_id: str) -> OrderResult | None:
        """Cancel an open order (its cash is released). A finished order is returned as it is;
        an unknown id gives None."""
        self.expire_due_orders()
        order = self._book.cancel(client_order_id, self._clock.now_ms())
        self._commit(())
        return None if order is None else order.to_result()

    async def lookup(self, client_order_id: str) -> OrderResult | None:
        self.expire_due_orders()
        order = self._book.order(client_order_id)
        return None if order is None else order.to_result()

    # ---- the market

    def on_market_price(
        self,
        ticker: str,
        price: float,
        *,
        low: float | None = None,
        high: float | None = None,
        at_ms: int,
    ) -> BookUpdate:
        """The market traded at ``price`` at ``at_ms``, and across ``[low, high]`` since the
        previous call for this ticker. Marks the position, fills and expires orders."""
        update = self._book.on_market(ticker, price, low=low, high=high, at_ms=at_ms)
        if update:
            self._commit(update.fills)
        return update

    def on_market_tick(self, event: Event) -> None:
        """Price sink / inline bus handler for ``market.tick``: feeds what traded since the
        stream's previous push (``broker.traded_range``).

        It never raises into the tick path: a failure (a save that failed, an impossible price)
        is logged with its traceback when it starts, and its end is logged too; while it lasts,
        every tick retries (a fill that could not be saved fills on a later tick).
        """
        if not isinstance(event, MarketTick):
            return
        book = self._book
        if (
            not book.has_open_orders
            and not self._ticks_failing
            and 0.0 < event.low <= event.close <= event.high < math.inf
        ):
            # Most ticks: nothing to fill or expire, and prices ``check_market_prices`` accepts
            # whichever of them the traded range keeps, so only the range memory and the mark
            # change (the general path below would come to the same).
            if self._ranges.note(event):
                book.mark_market(event.ticker, event.close, event.event_time_ms)
            return
        traded = self._ranges.observe(event)
        if traded is None:
            return
        try:
            self.on_market_price(
                event.ticker, traded.price, low=traded.low, high=traded.high, at_ms=traded.at_ms
            )
        except Exception:
            self.tick_failures += 1
            if not self._ticks_failing:
                self._ticks_failing = True
                log.exception(
                    "paper: market tick for %s failed; retrying on every tick", event.ticker
                )
            return
        if self._ticks_failing:
            self._ticks_failing = False
            log.warning("paper: market ticks work again after %d failures", self.tick_failures)

    def expire_due_orders(self) -> tuple[OrderResult, ...]:
        """Expire BUY limits whose time to live is over by the clock; returns what expired."""
        if not self._book.has_open_orders:  # every read of the port asks; most find none open
            return ()
        expired = self._book.expire_due(self._clock.now_ms())
        if expired:
            self._commit(())
        return tuple(o.to_result() for o in expired)

    # ---- exact views (for the tracker, status lines and tests); synchronous, no side effects

    def portfolio_value_usd(self) -> Decimal:
        """Free cash + reserved cash + positions at their last market price (at cost before one)."""
        return self._book.portfolio_value_usd()

    @property
    def ledger(self) -> Ledger:
        return self._book.ledger

    def order(self, client_order_id: str) -> PaperOrder | None:
        return self._book.order(client_order_id)

    def open_orders(self) -> list[PaperOrder]:
        return self._book.open_orders()

    def mark(self, ticker: str) -> Mark | None:
        """The last market price seen for ``ticker`` (saved with the next change)."""
        return self._book.mark(ticker)

    # ---- persistence and events

    def save(self) -> None:
        """Write the book with its latest marks (shutdown: marks alone never trigger a save)."""
        if self._state_path is None:
            return
        document = self._book.to_document(self._clock.now_ms())
        write_document(self._state_path, document, durable=self._durable)
        self._saved = document

    def _commit(self, fills: Sequence[Fill]) -> None:
        """Save what changed, then announce the fills. A failed save undoes the change."""
        if self._book.revision != self._saved_revision and self._state_path is not None:
            document = self._book.to_document(self._clock.now_ms())
            try:
                write_document(self._state_path, document, durable=self._durable)
            except OSError as exc:
                self._rollback()
                log.exception("paper: could not save %s; change undone", self._state_path)
                raise HaltTradingError(
                    f"paper broker could not save its state to {self._state_path}: {exc}"
                ) from exc
            self._saved = document
        self._saved_revision = self._book.revision
        for fill in fills:
            self._publish_fill(fill)

    def _rollback(self) -> None:
        marks = dict(self._book.marks)
        self._book = PaperBook.from_document(
            self._saved.model_copy(update={"marks": marks}), self.terms
        )
        self._saved_revision = self._book.revision

    def _publish_fill(self, fill: Fill) -> None:
        if self._bus is None:
            return
        order = fill.order
        self._publish_filled(order)
        if fill.opened_position and fill.position_entry_price is not None:
            self._bus.publish(
                PositionOpened(
                    at_ms=order.updated_at_ms,
                    ticker=order.ticker,
                    quantity=float(fill.position_quantity),
                    entry_price=float(fill.position_entry_price),
                    signals=dict(order.signal_weights),
                    regime=order.regime,
                )
            )

    def announce_recorded_fills(self) -> int:
        """Publish ``order.filled`` again for every fill the saved book holds (on start).

        A kill between saving a fill and journaling it would otherwise lose its trades.csv row;
        the trades journal skips the fills it already has (by client order id), so each fill is
        journaled exactly once. Positions are not announced again: the tracker adopts them from
        ``get_positions_detail`` with the entry's signals and regime. Returns how many.
        """
        fills = [o for o in self._book.orders() if o.filled_quantity > 0]
        for order in fills:
            self._publish_filled(order, recovered=True)
        return len(fills)

    def _publish_filled(self, order: PaperOrder, *, recovered: bool = False) -> None:
        if self._bus is None:
            return
        assert order.average_price is not None  # a fill has a price
        self._bus.publish(
            OrderFilled(
                at_ms=order.updated_at_ms,
                client_order_id=order.client_order_id,
                ticker=order.ticker,
                side=order.side,
                quantity=float(order.filled_quantity),
                price=float(order.average_price),
                fee=float(order.fee_usd),
                recovered=recovered,
            )
        )

    def _load(self) -> tuple[PaperBook, PaperBookDocument] | None:
        assert self._state_path is not None
        path = self._state_path
        try:
            remove_stale_tmp_files(path)
            document = read_document(path)
            if document is None:
                return None
            book = PaperBook.from_document(document, self.terms)
        except (OSError, InvalidPaperStateError, LedgerError) as exc:
            raise RefuseToStartError(
                f"paper broker state {path} cannot be used: {exc}. It was left untouched: "
                "repair it, or move it away to start a fresh paper account"
            ) from exc
        ledger = book.ledger
        log.info(
            "paper: resumed %s: cash %s USD, reserved %s USD, %d positions, %d open orders",
            path,
            ledger.cash_usd,
            ledger.reserved_usd,
            len(ledger.positions),
            len(book.open_orders()),
        )
        return book, document

    def _save_initial(self) -> PaperBookDocument:
        document = self._book.to_document(self._clock.now_ms())
        if self._state_path is not None:
            try:
                write_document(self._state_path, document, durable=self._durable)
            except OSError as exc:
                raise RefuseToStartError(
                    f"paper broker cannot write its state file {self._state_path}: {exc}"
                ) from exc
            log.info(
                "paper: new account with %s USD, saved to %s",
                self._book.ledger.cash_usd,
                self._state_path,
            )
        return document


_DETAIL_NAMES = {
    "ticker",
    "quantity",
    "entry_price",
    "mark_price",
    "opened_at_ms",
    "signals",
    "regime",
}
require_plain(PositionDetail, frozenset(_DETAIL_NAMES))


def _position_detail(fields: dict[str, Any]) -> PositionDetail:
    """The detail, made without validation when its fields are of their types already (the
    ledger's and the order's are validated, the mark a traded float): the tracker reads the
    positions twice per agent cycle, and validating only copied the signals again."""
    mark = fields["mark_price"]
    signals = fields["signals"]
    if (
        (mark is None or type(mark) is float)
        and type(fields["ticker"]) is str
        and type(fields["opened_at_ms"]) is int
        and type(fields["regime"]) is str
        and is_float_map(signals)
    ):
        return unvalidated(PositionDetail, fields, _DETAIL_NAMES)
    return PositionDetail(**fields)


def _open_order(order: PaperOrder) -> OpenOrder:
    limit = order.limit_price
    unfilled = order.quantity - order.filled_quantity
    return OpenOrder(
        client_order_id=order.client_order_id,
        ticker=order.ticker,
        side=order.side,
        quantity=float(unfilled),
        limit_price=None if limit is None else float(limit),
        notional_usd=float(
            order.requested_notional_usd if limit is None else value_usd(unfilled, limit)
        ),
        placed_at_ms=order.placed_at_ms,
        expires_at_ms=order.expires_at_ms,
    )
