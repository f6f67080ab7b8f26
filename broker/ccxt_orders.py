"""The ccxt broker's orders: placed once per intent, journaled first, and read back.

Never two orders for one intent:

- the client order id is ``broker.ids.client_order_id(decision_id, ticker, action)``, written to the
  fsynced journal (``broker.order_journal``) BEFORE the order is sent;
- an intent already journaled is looked up, not placed again (finished ones answer from the
  journal);
- when sending fails without an answer (timeout, network error, 5xx, 429) the order is looked up by
  ``origClientOrderId``; only when the exchange says it does not exist is it sent again, with the
  same id (so a late arrival of the first one makes the second a -4116 duplicate while it rests);
- -4116 (duplicate client id) is answered by looking the order up; -1021 re-syncs time and sends
  again (Binance rejects -1021 before processing, so this cannot duplicate); -2019 (margin) is a
  rejection;
- an answer that cannot be read (``broker.exchange_answer``: a field missing, not a number, NaN) or
  is about another order (client order id, symbol or side) is taken as no answer: the order is
  looked up, and nothing is recorded from the unreadable one.

A finished order is journaled before its fill is announced (``broker.ccxt_fills``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Literal

import ccxt.async_support as ccxt_async
from ccxt.base import errors as ccxt_errors

from broker.ccxt_fills import FillAnnouncer
from broker.ccxt_rest import (
    CLOCK_SKEW,
    DUPLICATE_CLIENT_ID,
    FINAL_STATUSES,
    INSUFFICIENT_MARGIN,
    REDUCE_ONLY_REJECTED,
    UNKNOWN_OUTCOME,
    BinanceRest,
    binance_code,
    binance_msg,
)
from broker.exchange_answer import MalformedAnswerError
from broker.ids import client_order_id
from broker.order_journal import JournalEntry, JournalIntent, OrderJournal
from broker.port import Action, OrderIntent, OrderResult, PositionDetail
from core.clock import Clock
from core.errors import HaltTradingError
from market.ccxt_client import to_ccxt_symbol
from market.timeframes import to_binance_symbol

# the ccxt broker's parts log as one component, under the name operators already filter on
log = logging.getLogger("broker.ccxt_broker")


class CcxtOrders:
    def __init__(
        self,
        exchange: ccxt_async.binanceusdm,
        clock: Clock,
        rest: BinanceRest,
        journal: OrderJournal,
        fills: FillAnnouncer,
        *,
        max_sends: int,
        positions: Callable[[], Awaitable[list[PositionDetail]]],
    ) -> None:
        """``positions``: the exchange's positions now (a SELL closes the whole one)."""
        self._ex = exchange
        self._clock = clock
        self._rest = rest
        self._journal = journal
        self._fills = fills
        self._max_sends = max_sends
        self._positions = positions

    # -- placing -------------------------------------------------------------------------------

    async def execute(self, intent: OrderIntent) -> OrderResult:
        side: Literal["buy", "sell"] = "buy" if intent.action is Action.BUY else "sell"
        cid = client_order_id(intent.decision_id, intent.ticker, side.upper())
        entry = self._journal.get(cid)
        if entry is not None:
            found = await self.lookup_entry(entry)
            if found is not None:
                return found
            log.warning("order %s was journaled but never reached the exchange; sending", cid)
        journaled = JournalIntent(
            client_order_id=cid,
            decision_id=intent.decision_id,
            ticker=intent.ticker,
            side=side,
            requested_notional_usd=intent.notional_usd,
            at_ms=self._clock.now_ms(),
            signals=dict(intent.signal_weights),
            regime=intent.regime,
        )
        params, refusal = await self._order_params(intent, cid)
        self._journal.record_intent(journaled)  # durable BEFORE anything is sent
        if params is None:
            rejected = self.rejected(journaled, refusal)
            self._journal.record_final(rejected)
            return rejected
        return await self._send(journaled, params)

    async def _order_params(
        self, intent: OrderIntent, cid: str
    ) -> tuple[dict[str, Any] | None, str]:
        symbol = to_ccxt_symbol(intent.ticker)
        base: dict[str, Any] = {"symbol": to_binance_symbol(intent.ticker), "newClientOrderId": cid}
        if intent.action is Action.SELL:
            held = [p for p in await self._positions() if p.ticker == intent.ticker]
            if not held:
                return None, f"no position in {intent.ticker} to sell"
            quantity = self._ex.amount_to_precision(symbol, held[0].quantity)
            return {
                **base,
                "side": "SELL",
                "type": "MARKET",
                "quantity": quantity,
                "reduceOnly": "true",
            }, ""
        try:
            quantity = self._ex.amount_to_precision(
                symbol, intent.notional_usd / intent.reference_price
            )
            price = self._ex.price_to_precision(symbol, intent.reference_price)
        except ccxt_errors.InvalidOrder as exc:  # rounds to less than one lot
            return None, f"order too small for the lot size: {exc}"
        except ArithmeticError:
            # ccxt's decimal rounding gives up on a number of hundreds of digits (the quantity
            # at a limit such as 1e-300): raised, it failed the whole decision
            return None, f"no order quantity or price at the limit {intent.reference_price!r}"
        min_cost = (self._ex.market(symbol).get("limits", {}).get("cost") or {}).get("min")
        cost = float(quantity) * float(price)
        if float(quantity) <= 0 or (min_cost is not None and cost < float(min_cost)):
            return None, f"order of {cost:.2f} USDT is below the minimum notional {min_cost}"
        return {
            **base,
            "side": "BUY",
            "type": "LIMIT",
            "timeInForce": "GTC",
            "quantity": quantity,
            "price": price,
        }, ""

    async def _send(self, intent: JournalIntent, params: dict[str, Any]) -> OrderResult:
        cid = intent.client_order_id
        post = self._rest.api("fapiPrivatePostOrder")
        for attempt in range(1, self._max_sends + 1):
            try:
                raw = await post(params)
            except asyncio.CancelledError:
                raise
            except ccxt_errors.BaseError as exc:
                code = binance_code(exc)
                if code == CLOCK_SKEW:
                    log.warning("order %s: clock skew (-1021); re-syncing time", cid)
                    await self._rest.sync_time()
                    continue
                if code == DUPLICATE_CLIENT_ID:
                    return await self._must_find(intent, "the exchange says it exists (-4116)")
                if (
                    code is None
                    or code in UNKNOWN_OUTCOME
                    or isinstance(exc, ccxt_errors.OperationFailed)
                ):
                    log.warning(
                        "order %s: no answer (%s: %s), send %d/%d; looking it up",
                        cid,
                        type(exc).__name__,
                        binance_msg(exc),
                        attempt,
                        self._max_sends,
                    )
                    found = await self.lookup_entry(JournalEntry(intent=intent))
                    if found is not None:
                        return found
                    continue  # the exchange confirms it does not exist: send it again
                reason = f"{binance_msg(exc)} ({code})"
                if code == INSUFFICIENT_MARGIN:
                    reason = f"insufficient margin: {reason}"
                elif code == REDUCE_ONLY_REJECTED:
                    reason = f"no position to reduce: {reason}"
                rejected = self.rejected(intent, reason)
                self._journal.record_final(rejected)
                return rejected
            try:
                return await self.record(await self._rest.order_result(raw, intent))
            except MalformedAnswerError as exc:  # accepted or not: only a lookup can say
                log.warning(
                    "order %s: unreadable answer (%s), send %d/%d; looking it up",
                    cid,
                    exc,
                    attempt,
                    self._max_sends,
                )
                found = await self.lookup_entry(JournalEntry(intent=intent))
                if found is not None:
                    return found
        # unresolved: stays pending in the journal; the next look (or restart) finds the truth
        return self.rejected(intent, f"no answer from the exchange after {self._max_sends} sends")

    async def _must_find(self, intent: JournalIntent, why: str) -> OrderResult:
        found = await self.lookup_entry(JournalEntry(intent=intent))
        if found is None:
            raise HaltTradingError(f"order {intent.client_order_id}: {why}, but lookup finds none")
        return found

    # -- reading orders ------------------------------------------------------------------------

    async def lookup_entry(self, entry: JournalEntry) -> OrderResult | None:
        if entry.final is not None:
            return entry.final
        intent = entry.intent
        raw = await self._rest.fetch_order(to_binance_symbol(intent.ticker), intent.client_order_id)
        if raw is None:
            return None
        return await self.record(await self._rest.order_result(raw, intent))

    async def record(self, result: OrderResult) -> OrderResult:
        before = self._journal.get(result.client_order_id)
        if result.status in FINAL_STATUSES and before is not None:
            self._journal.record_final(result)  # durable before it is announced
            self._fills.on_final(before, result)
        return result

    def rejected(self, intent: JournalIntent, reason: str) -> OrderResult:
        return OrderResult(
            client_order_id=intent.client_order_id,
            ticker=intent.ticker,
            side=intent.side,
            status="rejected",
            requested_notional_usd=intent.requested_notional_usd,
            reason=reason,
            at_ms=self._clock.now_ms(),
        )


__all__ = ["CcxtOrders"]
