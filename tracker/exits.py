"""``ExitPath``: how a tracked position is sold and its exit handed on.

An exit is a SELL intent through the broker with the decision id ``exit-<reason>-<ticker>-<at_ms>``;
its client order id is saved with the position BEFORE it is sent (a decision's SELL too, in
``filter_sells``). An open exit order is followed by the next checks (``follow``). A filled exit is
first handed to ``record_exit`` (the durable exits outbox, keyed by that client order id), then
untracked, then published as ``position.exit``. A kill anywhere in between is settled on restart:
the saved exit order is looked up and its fill recorded (recording the same key twice adds nothing).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

from broker.ids import client_order_id
from broker.port import Action, Broker, OrderIntent, OrderResult, PositionDetail
from broker.resting import cancel_resting_buys
from core.bus import EventBus
from core.clock import Clock
from core.events import PositionExit
from core.failure_streak import FailureStreak
from tracker.market_view import MarketView
from tracker.positions import TrackedPosition
from tracker.safety import ExitReason, pnl_pct
from tracker.tracked_book import TrackedBook

# the tracker's log lines keep the logger they always had
log = logging.getLogger("tracker.tracker")

#: makes an exit durable (the exits outbox) under its key, the SELL's client order id
ExitRecorder = Callable[[str, PositionExit], object]


class ExitPath:
    def __init__(
        self,
        clock: Clock,
        bus: EventBus,
        broker: Broker,
        book: TrackedBook,
        market: MarketView,
        *,
        record_exit: ExitRecorder,
        failpoint: Callable[[str], None],
        on_record_failed: Callable[[str], None] = lambda _why: None,
    ) -> None:
        """``on_record_failed(why)``: a filled exit the outbox could not record (the tracker
        halts trading)."""
        self._clock = clock
        self._bus = bus
        self._broker = broker
        self._book = book
        self._market = market
        self._record_exit = record_exit
        self._failpoint = failpoint
        self._on_record_failed = on_record_failed
        self._unrecorded = FailureStreak()
        self._lock = asyncio.Lock()

    async def exit_position(
        self, ticker: str, reason: ExitReason, *, reference_price: float | None = None
    ) -> PositionExit | None:
        """Sell the whole tracked position. Returns the published exit, or None when nothing was
        sold now (untracked: skipped and logged; not held: untracked; rejected: retried by the
        next check; an order still open: followed by the next checks)."""
        async with self._lock:
            position = self._book.positions.get(ticker)
            if position is None:
                log.warning(
                    "tracker: %s for %s skipped: the position is not tracked", reason.value, ticker
                )
                return None
            if ticker in self._book.pending_exits:
                return await self.follow(ticker)
            held = {p.ticker: p for p in await self._broker.get_positions_detail()}.get(ticker)
            if held is None:
                log.warning(
                    "tracker: %s for %s: the broker holds no such position; untracked",
                    reason.value,
                    ticker,
                )
                self._book.untrack(ticker)
                return None
            for cancelled in await cancel_resting_buys(self._broker, (ticker,)):
                log.info(
                    "tracker: %s for %s cancels resting BUY %s", reason.value, ticker, cancelled
                )
            intent = await self._sell_intent(position, held, reason, reference_price)
            self._book.expect_exit(
                ticker, client_order_id(intent.decision_id, ticker, "SELL"), reason
            )
            (result,) = await self._broker.execute_decisions([intent])
            return self.settle(ticker, reason, result)

    async def _sell_intent(
        self,
        position: TrackedPosition,
        held: PositionDetail,
        reason: ExitReason,
        reference_price: float | None,
    ) -> OrderIntent:
        """The SELL of everything held, priced at the reference, the mark, the broker's mark or
        the entry (the first one known)."""
        ticker = position.ticker
        price = reference_price or self._market.mark_price(ticker) or held.mark_price
        price = price or position.entry_price
        at_ms = self._clock.now_ms()
        notional = held.quantity * price
        portfolio = await self._broker.get_portfolio_value()
        return OrderIntent(
            decision_id=f"exit-{reason.slug}-{ticker}-{at_ms}",
            ticker=ticker,
            action=Action.SELL,
            notional_usd=notional,
            reference_price=price,
            position_pct=min(1.0, notional / portfolio) if portfolio > 0 else 0.0,
            signal_weights=dict(position.signals),
            reasoning=reason.value,
        )

    async def follow(self, ticker: str) -> PositionExit | None:
        """Look up the exit order in flight for ``ticker`` and settle what it became."""
        order_id, reason = self._book.pending_exits[ticker]
        result = await self._broker.lookup(order_id)
        if result is None:
            log.error(
                "tracker: exit order %s for %s is unknown to the broker; retrying the exit",
                order_id,
                ticker,
            )
            del self._book.pending_exits[ticker]
            self._book.persist()
            return None
        return self.settle(ticker, reason, result)

    def settle(self, ticker: str, reason: ExitReason, result: OrderResult) -> PositionExit | None:
        """An open order is followed, a failed one forgotten (the next check retries), a filled
        one becomes the published exit."""
        if result.status == "open":
            if self._book.pending_exits.get(ticker) != (result.client_order_id, reason):
                self._book.expect_exit(ticker, result.client_order_id, reason)
            log.info(
                "tracker: exit order %s for %s is open; following it",
                result.client_order_id,
                ticker,
            )
            return None
        if result.status != "filled" or result.average_price is None:
            if self._book.pending_exits.pop(ticker, None) is not None:
                self._book.persist()
            log.error(
                "tracker: %s for %s not filled (%s: %s); the next check retries",
                reason.value,
                ticker,
                result.status,
                result.reason or "no reason given",
            )
            return None
        return self._filled(ticker, reason, result, result.average_price)

    def _filled(
        self, ticker: str, reason: ExitReason, result: OrderResult, fill_price: float
    ) -> PositionExit | None:
        self._failpoint("after_exit_fill")
        position = self._book.positions.get(ticker)
        if position is None:
            log.warning("tracker: exit of %s filled but it was untracked meanwhile", ticker)
            return None
        at_ms = result.at_ms or self._clock.now_ms()
        event = PositionExit(
            at_ms=at_ms,
            ticker=ticker,
            reason=reason.value,
            pnl_pct=pnl_pct(position.entry_price, fill_price),
            holding_secs=max(0, at_ms - position.entry_time_ms) / 1000.0,
            regime=position.regime,
            signals=dict(position.signals),
        )
        log.info(
            "tracker: exited %s (%s) at %s: PnL %.2f %% after %.0f s",
            ticker,
            reason.value,
            fill_price,
            event.pnl_pct,
            event.holding_secs,
        )
        if not self._recorded(result.client_order_id, event):
            return None
        self._failpoint("after_exit_recorded")
        self._book.untrack(ticker)
        self._bus.publish(event)
        return event

    def _recorded(self, key: str, event: PositionExit) -> bool:
        """Make the exit durable before it is forgotten. An outbox that cannot be written (a full
        disk) keeps the exit in flight: each check looks the order up and records it again, so
        it is recorded once the disk frees. Meanwhile the position is sold but still tracked,
        so trading halts; the first failure is logged with its traceback, not every check's."""
        try:
            self._record_exit(key, event)
        except OSError as exc:
            if self._unrecorded.failed():
                log.exception(
                    "tracker: exit %s of %s could not be recorded; each check retries it",
                    key,
                    event.ticker,
                )
                self._on_record_failed(f"exit of {event.ticker} could not be recorded: {exc}")
            return False
        if failures := self._unrecorded.ended():
            log.warning("tracker: exits recorded again after %d failed tries", failures)
        return True

    # ---- the decision routine's SELLs

    def filter_sells(self, intents: Sequence[OrderIntent]) -> list[OrderIntent]:
        """Drop (and log) SELL intents for positions the tracker does not track."""
        kept = []
        for intent in intents:
            if intent.action is Action.SELL and intent.ticker not in self._book.positions:
                log.warning(
                    "tracker: SELL %s (decision %s) skipped: the position is not tracked",
                    intent.ticker,
                    intent.decision_id,
                )
                continue
            if intent.action is Action.SELL and intent.ticker in self._book.pending_exits:
                log.warning(
                    "tracker: SELL %s (decision %s) skipped: an exit order is already in flight",
                    intent.ticker,
                    intent.decision_id,
                )
                continue
            if intent.action is Action.SELL:  # saved before it is sent, as the tracker's exits
                cid = client_order_id(intent.decision_id, intent.ticker, "SELL")
                self._book.pending_exits[intent.ticker] = (cid, ExitReason.DECISION_SELL)
            kept.append(intent)
        if any(i.action is Action.SELL for i in kept):
            self._book.persist()
        return kept

    async def on_executed(
        self, intents: Sequence[OrderIntent], results: Sequence[OrderResult]
    ) -> None:
        """After the decision routine executed: a filled SELL of a tracked position is an exit."""
        for intent, result in zip(intents, results, strict=False):
            ticker = intent.ticker
            if intent.action is not Action.SELL or ticker not in self._book.positions:
                continue
            if result.status == "filled":
                held = {p.ticker: p for p in await self._broker.get_positions_detail()}
                if ticker in held:  # a partial SELL: the rest stays guarded
                    self._book.pending_exits.pop(ticker, None)
                    self._book.reconcile_one(held[ticker])
                    self._book.persist()
                    continue
            self.settle(ticker, ExitReason.DECISION_SELL, result)
