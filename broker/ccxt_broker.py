"""CcxtBroker: the Broker port on Binance USDⓈ-M through ccxt's async ``binanceusdm``.

Order rules (the broker contract's, the same as the paper broker's): a BUY is a LIMIT GTC at the
intent's reference price for ``notional / price`` rounded down to the lot step; a SELL is a
reduce-only MARKET order for the whole long position. One cross-margined USDT account at
``leverage`` (1x by default, set per ticker on start), so margin is cash: ``get_cash`` is Binance's
``availableBalance``, ``get_portfolio_value`` its ``totalMarginBalance`` (wallet + unrealized PnL).

Never two orders for one intent:

- the client order id is ``broker.ids.client_order_id(decision_id, ticker, action)``, written to the
  fsynced journal (``broker.order_journal``) BEFORE the order is sent;
- an intent already journaled is looked up, not placed again (finished ones answer from the
  journal);
- when sending fails without an answer (timeout, network error, 5xx, 429) the order is looked up by
  ``origClientOrderId``; only when the exchange says it does not exist is it sent again, with the
  same id (so a late arrival of the first one makes the second a -4116 duplicate while it rests);
- -4116 (duplicate client id) is answered by looking the order up; -1021 (our clock is off the
  exchange's by more than ``recvWindow``) re-syncs ccxt's time difference and sends again (Binance
  rejects -1021 before processing, so this cannot duplicate); -2019 (margin) is a rejection.

``reconcile()`` runs before anything else (every port method calls it once if nobody did): markets,
time offset, one-way position mode (hedge mode refuses to start), leverage, every journaled order whose outcome is unknown looked up, open orders and
positions read; open orders the journal does not know (placed by a person) are reported, not
touched.

``get_open_orders`` (resting BUYs count as exposure in the risk caps) asks the exchange only while
the journal holds orders without an outcome, one ``openOrders`` request per symbol among them.

Requests use ccxt's raw endpoint methods (``fapiPrivatePostOrder``...) so the answers are Binance's
own fields, parsed here; reads are retried with ``market.ccxt_client.call_with_retries``.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Final, Literal

import ccxt.async_support as ccxt_async
from ccxt.base import errors as ccxt_errors
from pydantic import BaseModel, ConfigDict

from broker.ccxt_fills import FillAnnouncer, estimated_fee_usd
from broker.ids import client_order_id
from broker.live_guard import ApiKeys, Mode
from broker.order_journal import JournalEntry, JournalIntent, OrderJournal
from broker.port import Action, OpenOrder, OrderIntent, OrderResult, PositionDetail
from core.bus import EventBus
from core.clock import Clock
from core.errors import HaltTradingError, RefuseToStartError
from market.ccxt_client import (
    CcxtRequestRejectedError,
    RetryPolicy,
    call_with_retries,
    make_binanceusdm,
    retry_after_secs,
    to_ccxt_symbol,
)
from market.timeframes import to_binance_symbol

log = logging.getLogger(__name__)

CLOCK_SKEW: Final = -1021
INSUFFICIENT_MARGIN: Final = -2019
ORDER_NOT_FOUND: Final = -2013
UNKNOWN_ORDER: Final = -2011
REDUCE_ONLY_REJECTED: Final = -2022
DUPLICATE_CLIENT_ID: Final = -4116
#: Binance's "the request may or may not have been executed" codes (unknown, internal error,
#: unexpected response, backend timeout, busy): the outcome must be looked up
UNKNOWN_OUTCOME: Final = frozenset({-1000, -1001, -1006, -1007, -1008})
_CODE_RE: Final = re.compile(r'"code"\s*:\s*(-?\d+)')
_MSG_RE: Final = re.compile(r'"msg"\s*:\s*"([^"]*)"')
_STATUS: Final[dict[str, Literal["filled", "open", "rejected", "cancelled"]]] = {
    "NEW": "open",
    "PARTIALLY_FILLED": "open",
    "FILLED": "filled",
    "CANCELED": "cancelled",
    "EXPIRED": "cancelled",
    "EXPIRED_IN_MATCH": "cancelled",
    "REJECTED": "rejected",
}
_FINAL: Final = frozenset({"filled", "cancelled", "rejected"})

Api = Callable[[dict[str, Any]], Awaitable[Any]]


class ReconcileReport(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    resolved: tuple[OrderResult, ...]  # journaled orders whose outcome was looked up
    never_sent: tuple[str, ...]  # journaled ids the exchange does not know (crash before send)
    open_client_order_ids: tuple[str, ...]
    foreign_open_orders: tuple[str, ...]  # open on the exchange, not placed by this journal
    positions: tuple[PositionDetail, ...]


def build_exchange(
    mode: Mode,
    keys: ApiKeys,
    *,
    rest_url: str | None = None,
    timeout_ms: int = 10_000,
    enable_rate_limit: bool = True,
) -> ccxt_async.binanceusdm:
    """A signed ``binanceusdm``: the simulator at ``rest_url``, else demo trading or live."""
    exchange = make_binanceusdm(
        rest_url, timeout_ms=timeout_ms, enable_rate_limit=enable_rate_limit
    )
    if rest_url is None and mode == "testnet":
        exchange.enable_demo_trading(True)
    exchange.apiKey = keys.api_key.get_secret_value()
    exchange.secret = keys.api_secret.get_secret_value()
    return exchange


def binance_code(exc: BaseException) -> int | None:
    """The ``code`` of the Binance error body ccxt put in the exception message, if any."""
    found = _CODE_RE.search(str(exc))
    return int(found.group(1)) if found else None


def _binance_msg(exc: BaseException) -> str:
    found = _MSG_RE.search(str(exc))
    return found.group(1) if found else type(exc).__name__


class CcxtBroker:
    def __init__(
        self,
        exchange: ccxt_async.binanceusdm,
        clock: Clock,
        journal_path: Path,
        *,
        tickers: Sequence[str] = (),
        leverage: int = 1,
        retry_policy: RetryPolicy | None = None,
        max_sends: int = 3,
        bus: EventBus | None = None,
        maker_fee_pct: float = 0.02,
        taker_fee_pct: float = 0.05,
    ) -> None:
        """``bus``: where fills are announced (``broker.ccxt_fills``); the fee rates (percent)
        only estimate a fee the exchange's trades request could not tell."""
        self._ex = exchange
        self._clock = clock
        self._journal = OrderJournal(journal_path)
        self._fills = FillAnnouncer(self._journal, bus)
        self._fee_pct = (maker_fee_pct, taker_fee_pct)
        self._tickers = tuple(tickers)
        self._leverage = leverage
        self._policy = retry_policy or RetryPolicy(max_attempts=4, base_secs=0.5, cap_secs=10.0)
        self._max_sends = max_sends
        self._reconciled = False
        self._lock = asyncio.Lock()
        self._start_lock = asyncio.Lock()

    async def close(self) -> None:
        await self._ex.close()

    # -- start ---------------------------------------------------------------------------------

    async def reconcile(self) -> ReconcileReport:
        """Bring the journal in line with the exchange before trading (see the module docstring)."""
        self._journal.load()
        await call_with_retries(
            self._clock, self._ex.load_markets, what="load markets", policy=self._policy
        )
        await self._sync_time()
        mode = await self._request("fapiPrivateGetPositionSideDual", {}, what="position mode")
        if mode.get("dualSidePosition") in (True, "true"):
            raise RefuseToStartError(
                "the Binance account is in hedge mode (dualSidePosition); vigil trades one-way "
                "positions: switch the account to one-way mode first"
            )
        for ticker in self._tickers:
            await self._request(
                "fapiPrivatePostLeverage",
                {"symbol": to_binance_symbol(ticker), "leverage": self._leverage},
                what=f"set leverage {ticker}",
            )
        resolved: list[OrderResult] = []
        never_sent: list[str] = []
        for entry in self._journal.pending():
            found = await self._lookup_entry(entry)
            if found is None:
                never_sent.append(entry.intent.client_order_id)
                self._journal.record_final(
                    self._rejected(entry.intent, "never reached the exchange (found on restart)")
                )
            else:
                resolved.append(found)
        open_raw = await self._request("fapiPrivateGetOpenOrders", {}, what="open orders")
        open_ids = tuple(str(o["clientOrderId"]) for o in open_raw)
        foreign = tuple(cid for cid in open_ids if self._journal.get(cid) is None)
        if foreign:
            log.warning("open orders not placed by vigil (left alone): %s", ", ".join(foreign))
        self._reconciled = True
        report = ReconcileReport(
            resolved=tuple(resolved),
            never_sent=tuple(never_sent),
            open_client_order_ids=open_ids,
            foreign_open_orders=foreign,
            positions=tuple(await self._positions()),
        )
        log.info(
            "reconciled with the exchange: %d resolved, %d never sent, %d open, %d positions",
            len(report.resolved),
            len(report.never_sent),
            len(report.open_client_order_ids),
            len(report.positions),
        )
        return report

    async def _sync_time(self) -> None:
        await call_with_retries(
            self._clock,
            self._ex.load_time_difference,
            what="exchange time",
            policy=self._policy,
        )

    # -- Broker port ---------------------------------------------------------------------------

    async def execute_decisions(self, intents: Sequence[OrderIntent]) -> Sequence[OrderResult]:
        await self._ready()
        async with self._lock:  # one at a time: a journal check and its send must not interleave
            return [await self._execute(intent) for intent in intents]

    async def lookup(self, client_order_id: str) -> OrderResult | None:
        await self._ready()
        entry = self._journal.get(client_order_id)
        if entry is not None:
            return await self._lookup_entry(entry)
        for symbol in self._symbols_for(client_order_id):
            raw = await self._fetch_order(symbol, client_order_id)
            if raw is not None:
                return await self._result(raw, None)
        return None

    async def cancel(self, client_order_id: str) -> OrderResult | None:
        current = await self.lookup(client_order_id)
        if current is None or current.status != "open":
            return current
        params = {"symbol": to_binance_symbol(current.ticker), "origClientOrderId": client_order_id}
        try:
            await self._request("fapiPrivateDeleteOrder", params, what=f"cancel {client_order_id}")
        except CcxtRequestRejectedError as exc:
            if binance_code(exc) != UNKNOWN_ORDER:  # -2011: it filled meanwhile
                raise
        return await self.lookup(client_order_id)

    async def get_positions_detail(self) -> Sequence[PositionDetail]:
        """Positions, after settling orders that finished since (so a limit BUY that filled is
        announced before anyone sees its position)."""
        await self._ready()
        async with self._lock:
            await self._settle_pending()
        return await self._positions()

    def announce_recorded_fills(self) -> int:
        """Publish every journaled fill again (on start; see ``broker.ccxt_fills``)."""
        self._journal.load()
        return self._fills.announce_recorded()

    async def get_portfolio_value(self) -> float:
        await self._ready()
        account = await self._request("fapiPrivateV3GetAccount", {}, what="account")
        return float(account["totalMarginBalance"])

    async def get_cash(self) -> float:
        await self._ready()
        account = await self._request("fapiPrivateV3GetAccount", {}, what="account")
        return float(account["availableBalance"])

    async def get_open_orders(self) -> Sequence[OpenOrder]:
        """vigil's resting orders, oldest first (orders a person placed are reconcile's report).

        The journal names the orders that may still rest: those without a final outcome. With
        none there is nothing to ask. Otherwise the exchange is asked, one ``openOrders`` request
        per symbol among them (the journal cannot know about fills on its own); a pending order
        that is no longer open is looked up once, so its outcome is journaled and never asked
        about again.
        """
        await self._ready()
        async with self._lock:  # an order being sent is either not journaled yet or resting
            return await self._settle_pending()

    async def _settle_pending(self) -> list[OpenOrder]:
        """The journal's pending orders still resting; those finished since are looked up."""
        pending = self._journal.pending()
        if not pending:
            return []
        resting: dict[str, dict[str, Any]] = {}
        for symbol in sorted({to_binance_symbol(e.intent.ticker) for e in pending}):
            raw = await self._request(
                "fapiPrivateGetOpenOrders", {"symbol": symbol}, what=f"open orders {symbol}"
            )
            resting.update((str(o["clientOrderId"]), dict(o)) for o in raw)
        found: list[OpenOrder] = []
        for entry in pending:
            raw_order = resting.get(entry.intent.client_order_id)
            if raw_order is None:
                await self._lookup_entry(entry)  # finished since: journal how
            else:
                found.append(_open_order(entry.intent, raw_order))
        return sorted(found, key=lambda o: o.placed_at_ms)  # ties: journal (placing) order

    async def _ready(self) -> None:
        """Reconcile once before anything else talks to the exchange."""
        if self._reconciled:
            return
        async with self._start_lock:
            if not self._reconciled:
                await self.reconcile()

    async def _positions(self) -> list[PositionDetail]:
        raw = await self._request("fapiPrivateV3GetPositionRisk", {}, what="positions")
        details: list[PositionDetail] = []
        for row in raw:
            amount = float(row["positionAmt"])
            if amount == 0.0:
                continue
            ticker = self._ticker_of(str(row["symbol"]))
            if amount < 0:
                raise HaltTradingError(
                    f"short position of {amount} {ticker} on the exchange; vigil is long-only"
                )
            mark = float(row.get("markPrice") or 0.0)
            entry = self._fills.entry_of(ticker)
            details.append(
                PositionDetail(
                    ticker=ticker,
                    quantity=amount,
                    entry_price=float(row["entryPrice"]),
                    mark_price=mark if mark > 0 else None,
                    opened_at_ms=self._opened_at_ms(entry, int(row.get("updateTime") or 0)),
                    signals=dict(entry.intent.signals) if entry is not None else {},
                    regime=entry.intent.regime if entry is not None else "",
                )
            )
        return details

    # -- placing -------------------------------------------------------------------------------

    async def _execute(self, intent: OrderIntent) -> OrderResult:
        side: Literal["buy", "sell"] = "buy" if intent.action is Action.BUY else "sell"
        cid = client_order_id(intent.decision_id, intent.ticker, side.upper())
        entry = self._journal.get(cid)
        if entry is not None:
            found = await self._lookup_entry(entry)
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
            rejected = self._rejected(journaled, refusal)
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
        except ccxt_errors.InvalidOrder as exc:  # rounds to less than one lot
            return None, f"order too small for the lot size: {exc}"
        price = self._ex.price_to_precision(symbol, intent.reference_price)
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
        post = self._api("fapiPrivatePostOrder")
        for attempt in range(1, self._max_sends + 1):
            try:
                raw = await post(params)
            except asyncio.CancelledError:
                raise
            except ccxt_errors.BaseError as exc:
                code = binance_code(exc)
                if code == CLOCK_SKEW:
                    log.warning("order %s: clock skew (-1021); re-syncing time", cid)
                    await self._sync_time()
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
                        _binance_msg(exc),
                        attempt,
                        self._max_sends,
                    )
                    found = await self._lookup_entry(JournalEntry(intent=intent))
                    if found is not None:
                        return found
                    continue  # the exchange confirms it does not exist: send it again
                reason = f"{_binance_msg(exc)} ({code})"
                if code == INSUFFICIENT_MARGIN:
                    reason = f"insufficient margin: {reason}"
                elif code == REDUCE_ONLY_REJECTED:
                    reason = f"no position to reduce: {reason}"
                rejected = self._rejected(intent, reason)
                self._journal.record_final(rejected)
                return rejected
            return await self._record(await self._result(raw, intent))
        # unresolved: stays pending in the journal; the next look (or restart) finds the truth
        return self._rejected(intent, f"no answer from the exchange after {self._max_sends} sends")

    async def _must_find(self, intent: JournalIntent, why: str) -> OrderResult:
        found = await self._lookup_entry(JournalEntry(intent=intent))
        if found is None:
            raise HaltTradingError(f"order {intent.client_order_id}: {why}, but lookup finds none")
        return found

    # -- reading orders ------------------------------------------------------------------------

    async def _lookup_entry(self, entry: JournalEntry) -> OrderResult | None:
        if entry.final is not None:
            return entry.final
        intent = entry.intent
        raw = await self._fetch_order(to_binance_symbol(intent.ticker), intent.client_order_id)
        if raw is None:
            return None
        return await self._record(await self._result(raw, intent))

    async def _fetch_order(self, symbol: str, cid: str) -> dict[str, Any] | None:
        try:
            raw = await self._request(
                "fapiPrivateGetOrder",
                {"symbol": symbol, "origClientOrderId": cid},
                what=f"order {cid}",
            )
        except CcxtRequestRejectedError as exc:
            if binance_code(exc) == ORDER_NOT_FOUND:
                return None
            raise
        return dict(raw)

    async def _record(self, result: OrderResult) -> OrderResult:
        before = self._journal.get(result.client_order_id)
        if result.status in _FINAL and before is not None:
            self._journal.record_final(result)  # durable before it is announced
            self._fills.on_final(before, result)
        return result

    async def _result(self, raw: dict[str, Any], intent: JournalIntent | None) -> OrderResult:
        symbol = str(raw["symbol"])
        status = _STATUS.get(str(raw["status"]))
        if status is None:
            raise HaltTradingError(f"unknown order status {raw['status']!r} from the exchange")
        filled = float(raw.get("executedQty") or 0.0)
        average = float(raw["avgPrice"]) if filled > 0 else None
        fee, estimated = 0.0, False
        if average is not None:
            fee, estimated = await self._fee_usd(
                symbol, int(raw["orderId"]), filled * average, is_maker=raw.get("type") == "LIMIT"
            )
        requested = (
            intent.requested_notional_usd
            if intent is not None
            else float(raw["origQty"]) * float(raw.get("price") or 0.0)
        )
        return OrderResult(
            client_order_id=str(raw["clientOrderId"]),
            ticker=intent.ticker if intent is not None else self._ticker_of(symbol),
            side="buy" if raw["side"] == "BUY" else "sell",
            status=status,
            requested_notional_usd=requested,
            filled_quantity=filled,
            average_price=average,
            fee_usd=fee,
            fee_estimated=estimated,
            at_ms=max(0, int(raw.get("updateTime") or 0)),
        )

    async def _fee_usd(
        self, symbol: str, order_id: int, notional_usd: float, *, is_maker: bool
    ) -> tuple[float, bool]:
        """The fee the exchange charged, and whether it is an estimate: a fill is never held
        back (nor its decision's journaling aborted) because its fee cannot be read."""
        try:
            trades = await self._request(
                "fapiPrivateGetUserTrades",
                {"symbol": symbol, "orderId": order_id},
                what=f"fills of order {order_id}",
            )
            other = {t["commissionAsset"] for t in trades if t["commissionAsset"] != "USDT"}
            if not other:
                return sum(float(t["commission"]) for t in trades), False
            why = f"fees paid in {sorted(other)}, only USDT is valued"  # e.g. a BNB discount
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            why = f"{type(exc).__name__}: {exc}"
        maker_pct, taker_pct = self._fee_pct
        estimate = estimated_fee_usd(
            notional_usd, 1.0, is_maker=is_maker, maker_pct=maker_pct, taker_pct=taker_pct
        )
        log.warning("order %s: fee unknown (%s); estimated %.6f USDT", order_id, why, estimate)
        return estimate, True

    # -- plumbing ------------------------------------------------------------------------------

    def _api(self, name: str) -> Api:
        method: Api = getattr(self._ex, name)
        return method

    async def _request(self, name: str, params: dict[str, Any], *, what: str) -> Any:
        """A signed read (or idempotent write) with retries; -1021 re-syncs time first."""
        method = self._api(name)

        async def once() -> Any:
            try:
                return await method(dict(params))
            except ccxt_errors.BaseError as exc:
                if binance_code(exc) != CLOCK_SKEW:
                    raise
                log.warning("%s: clock skew (-1021); re-syncing time", what)
                await self._sync_time()
                return await method(dict(params))

        # rejections raise CcxtRequestRejectedError, whose message keeps Binance's error body
        # (``binance_code`` reads it); transient failures that outlast the retries raise
        # CcxtRetryableError
        return await call_with_retries(
            self._clock,
            once,
            what=what,
            policy=self._policy,
            retry_after=lambda: retry_after_secs(self._ex),
        )

    def _ticker_of(self, symbol: str) -> str:
        markets = self._ex.markets_by_id or {}
        found = markets.get(symbol)
        if found:
            market = found[0] if isinstance(found, list) else found
            return f"{market['base']}/{market['quote']}"
        raise HaltTradingError(f"the exchange reports unknown symbol {symbol!r}")

    def _symbols_for(self, cid: str) -> list[str]:
        """Symbols whose id matches the readable part of a client order id (see broker.ids)."""
        parts = cid.split("-")
        if len(parts) != 3 or not parts[0].startswith("vg"):
            return []
        return sorted(
            str(m["id"])
            for m in (self._ex.markets or {}).values()
            if m.get("linear") and str(m["id"])[:10] == parts[1]
        )

    @staticmethod
    def _opened_at_ms(entry: JournalEntry | None, fallback_ms: int) -> int:
        """The first BUY fill since the last SELL fill in the journal; else the exchange's
        ``updateTime`` (Binance reports no open time)."""
        if entry is None or entry.final is None:
            return fallback_ms
        return entry.final.at_ms

    def _rejected(self, intent: JournalIntent, reason: str) -> OrderResult:
        return OrderResult(
            client_order_id=intent.client_order_id,
            ticker=intent.ticker,
            side=intent.side,
            status="rejected",
            requested_notional_usd=intent.requested_notional_usd,
            reason=reason,
            at_ms=self._clock.now_ms(),
        )


def _open_order(intent: JournalIntent, raw: dict[str, Any]) -> OpenOrder:
    """A resting order as Binance reports it; the time it was placed is the journal's."""
    unfilled = max(0.0, float(raw["origQty"]) - float(raw.get("executedQty") or 0.0))
    price = float(raw.get("price") or 0.0)
    limit = price if price > 0 else None
    return OpenOrder(
        client_order_id=intent.client_order_id,
        ticker=intent.ticker,
        side=intent.side,
        quantity=unfilled,
        limit_price=limit,
        notional_usd=unfilled * limit if limit is not None else intent.requested_notional_usd,
        placed_at_ms=max(0, intent.at_ms),
        expires_at_ms=None,  # GTC
    )


__all__ = ["CcxtBroker", "ReconcileReport", "binance_code", "build_exchange"]
