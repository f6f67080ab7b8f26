"""Signed requests to Binance USDⓈ-M through ccxt's raw endpoint methods, and reading orders back.

Requests use ccxt's raw endpoint methods (``fapiPrivatePostOrder``...) so the answers are Binance's
own fields, parsed here; reads are retried with ``market.ccxt_client.call_with_retries``. -1021 (our
clock is off the exchange's by more than ``recvWindow``) re-syncs ccxt's time difference and sends
again. An order's fee is read from the exchange's trades; when that fails, or the fee was paid in
another asset than USDT, it is estimated from the configured rates and marked as an estimate.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, Literal

import ccxt.async_support as ccxt_async
from ccxt.base import errors as ccxt_errors

from broker import exchange_answer as answer
from broker.ccxt_fills import estimated_fee_usd
from broker.order_journal import JournalIntent
from broker.port import OrderResult
from core.clock import Clock
from core.errors import HaltTradingError
from market.ccxt_client import (
    CcxtRequestRejectedError,
    RetryPolicy,
    call_with_retries,
    retry_after_secs,
)
from market.timeframes import to_binance_symbol

# the ccxt broker's parts log as one component, under the name operators already filter on
log = logging.getLogger("broker.ccxt_broker")

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
ORDER_STATUS: Final[dict[str, Literal["filled", "open", "rejected", "cancelled"]]] = {
    "NEW": "open",
    "PARTIALLY_FILLED": "open",
    "FILLED": "filled",
    "CANCELED": "cancelled",
    "EXPIRED": "cancelled",
    "EXPIRED_IN_MATCH": "cancelled",
    "REJECTED": "rejected",
}
FINAL_STATUSES: Final = frozenset({"filled", "cancelled", "rejected"})
#: relative: how far past its limit the average price of a limit order's fills may be written
_PRICE_SLACK: Final = 1e-9
#: an order time this far after the exchange's clock is a garbled answer, not a clock's drift
_MAX_AHEAD_MS: Final = 24 * 3600 * 1000

Api = Callable[[dict[str, Any]], Awaitable[Any]]


def binance_code(exc: BaseException) -> int | None:
    """The ``code`` of the Binance error body ccxt put in the exception message, if any."""
    found = _CODE_RE.search(str(exc))
    return int(found.group(1)) if found else None


def _check_same_order(order: Mapping[str, Any], intent: JournalIntent, what: str) -> None:
    """An answer about another order (id, symbol or side) would be recorded, and its fill
    announced, as this one's: it is no answer, and the order is looked up by its own id."""
    expected = {
        "clientOrderId": intent.client_order_id,
        "symbol": to_binance_symbol(intent.ticker),
        "side": intent.side.upper(),
    }
    for key, value in expected.items():
        if order.get(key) != value:
            raise answer.MalformedAnswerError(
                f"the exchange's answer to {what} is about another order: {key} is "
                f"{order.get(key)!r}, not {value!r}"
            )


def _check_within_limit(side: str, average: float, limit: float, what: str) -> None:
    """A limit order fills at its limit or better: an average beyond it is no fill the exchange
    made (a rounding of the average's last digit aside)."""
    slack = abs(limit) * _PRICE_SLACK
    if (side == "BUY" and average > limit + slack) or (side == "SELL" and average < limit - slack):
        raise answer.MalformedAnswerError(
            f"the exchange's answer to {what}: {side} limit at {limit!r} filled at {average!r}"
        )


def _order_trades(
    fills: list[Mapping[str, Any]], order_id: int, what: str
) -> list[Mapping[str, Any]]:
    """Each trade of the order once: a trade answered twice would pay its fee twice, another
    order's would pay that one's, and a filled order with none has no fee to read."""
    by_id: dict[int, Mapping[str, Any]] = {}
    for trade in fills:
        if answer.whole_number(trade, "orderId", what) != order_id:
            raise answer.MalformedAnswerError(f"the answer to {what} holds another order's trade")
        if by_id.setdefault(answer.whole_number(trade, "id", what), trade) != trade:
            raise answer.MalformedAnswerError(f"the answer to {what} holds two trades of one id")
    if not by_id:
        raise answer.MalformedAnswerError(f"the answer to {what} holds no trade")
    return list(by_id.values())


def binance_msg(exc: BaseException) -> str:
    found = _MSG_RE.search(str(exc))
    return found.group(1) if found else type(exc).__name__


class BinanceRest:
    """The signed endpoints the ccxt broker uses, retried; orders and their fees read back."""

    def __init__(
        self,
        exchange: ccxt_async.binanceusdm,
        clock: Clock,
        policy: RetryPolicy,
        *,
        maker_fee_pct: float,
        taker_fee_pct: float,
    ) -> None:
        self._ex = exchange
        self._clock = clock
        self._policy = policy
        self._fee_pct = (maker_fee_pct, taker_fee_pct)

    async def sync_time(self) -> None:
        await call_with_retries(
            self._clock,
            self._ex.load_time_difference,
            what="exchange time",
            policy=self._policy,
        )

    async def fetch_order(self, symbol: str, cid: str) -> dict[str, Any] | None:
        try:
            raw = await self.request(
                "fapiPrivateGetOrder",
                {"symbol": symbol, "origClientOrderId": cid},
                what=f"order {cid}",
            )
        except CcxtRequestRejectedError as exc:
            if binance_code(exc) == ORDER_NOT_FOUND:
                return None
            raise
        return dict(answer.row(raw, f"order {cid}"))

    async def order_result(self, raw: object, intent: JournalIntent | None) -> OrderResult:
        """The order as the exchange answered it (placed, or looked up); a ``MalformedAnswerError``
        when the answer is not one, so nothing is recorded from it."""
        what = "an order" if intent is None else f"order {intent.client_order_id}"
        order = answer.row(raw, what)
        symbol = answer.text(order, "symbol", what)
        raw_status = answer.text(order, "status", what)
        status = ORDER_STATUS.get(raw_status)
        if status is None:
            raise HaltTradingError(f"unknown order status {raw_status!r} from the exchange")
        side = answer.text(order, "side", what)
        if side not in ("BUY", "SELL"):
            raise answer.MalformedAnswerError(
                f"the exchange's answer to {what}: side is neither BUY nor SELL: {side!r}"
            )
        if intent is not None:
            _check_same_order(order, intent, what)
        ordered = answer.number(order, "origQty", what, at_least=0.0)
        filled = answer.number(order, "executedQty", what, default=0.0, at_least=0.0)
        if filled > ordered:
            raise answer.MalformedAnswerError(
                f"the exchange's answer to {what}: executedQty {filled!r} is more than "
                f"origQty {ordered!r}"
            )
        average = answer.number(order, "avgPrice", what, above=0.0) if filled > 0 else None
        if average is not None and order.get("type") == "LIMIT":
            _check_within_limit(side, average, answer.number(order, "price", what, above=0.0), what)
        fee, estimated = 0.0, False
        if average is not None:
            fee, estimated = await self._fee_usd(
                symbol,
                answer.whole_number(order, "orderId", what),
                filled * average,
                is_maker=order.get("type") == "LIMIT",
            )
        requested = (
            intent.requested_notional_usd
            if intent is not None
            else ordered * answer.number(order, "price", what, default=0.0, at_least=0.0)
        )
        return OrderResult(
            client_order_id=answer.text(order, "clientOrderId", what),
            ticker=intent.ticker if intent is not None else self.ticker_of(symbol),
            side="buy" if side == "BUY" else "sell",
            status=status,
            requested_notional_usd=requested,
            filled_quantity=filled,
            average_price=average,
            fee_usd=fee,
            fee_estimated=estimated,
            at_ms=self._time_ms(order, what),
        )

    def _time_ms(self, order: Mapping[str, Any], what: str) -> int:
        """The order's ``updateTime``, not after the exchange's now (ccxt's ``nonce``: our clock
        less the offset ``sync_time`` measured) by more than ``_MAX_AHEAD_MS``: a fill dated years
        ahead would be journaled for good, and a position opened then is never held long."""
        at_ms = answer.whole_number(order, "updateTime", what, default=0)
        if at_ms > self._ex.nonce() + _MAX_AHEAD_MS:
            raise answer.MalformedAnswerError(
                f"the exchange's answer to {what}: updateTime {at_ms} is after the exchange's now"
            )
        return at_ms

    async def _fee_usd(
        self, symbol: str, order_id: int, notional_usd: float, *, is_maker: bool
    ) -> tuple[float, bool]:
        """The fee the exchange charged, and whether it is an estimate: a fill is never held
        back (nor its decision's journaling aborted) because its fee cannot be read."""
        what = f"fills of order {order_id}"
        try:
            trades = await self.request(
                "fapiPrivateGetUserTrades", {"symbol": symbol, "orderId": order_id}, what=what
            )
            fills = _order_trades(answer.rows(trades, what), order_id, what)
            assets = [answer.text(t, "commissionAsset", what) for t in fills]
            other = {asset for asset in assets if asset != "USDT"}
            if not other:
                fees = [answer.number(t, "commission", what, at_least=0.0) for t in fills]
                return sum(fees), False
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

    def api(self, name: str) -> Api:
        method: Api = getattr(self._ex, name)
        return method

    async def request(self, name: str, params: dict[str, Any], *, what: str) -> Any:
        """A signed read (or idempotent write) with retries; -1021 re-syncs time first."""
        method = self.api(name)

        async def once() -> Any:
            try:
                return await method(dict(params))
            except ccxt_errors.BaseError as exc:
                if binance_code(exc) != CLOCK_SKEW:
                    raise
                log.warning("%s: clock skew (-1021); re-syncing time", what)
                await self.sync_time()
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

    def ticker_of(self, symbol: str) -> str:
        markets = self._ex.markets_by_id or {}
        found = markets.get(symbol)
        if found:
            market = found[0] if isinstance(found, list) else found
            return f"{market['base']}/{market['quote']}"
        raise HaltTradingError(f"the exchange reports unknown symbol {symbol!r}")

    def symbols_for(self, cid: str) -> list[str]:
        """Symbols whose id matches the readable part of a client order id (see broker.ids)."""
        parts = cid.split("-")
        if len(parts) != 3 or not parts[0].startswith("vg"):
            return []
        return sorted(
            str(m["id"])
            for m in (self._ex.markets or {}).values()
            if m.get("linear") and str(m["id"])[:10] == parts[1]
        )


__all__ = [
    "CLOCK_SKEW",
    "DUPLICATE_CLIENT_ID",
    "FINAL_STATUSES",
    "INSUFFICIENT_MARGIN",
    "ORDER_NOT_FOUND",
    "REDUCE_ONLY_REJECTED",
    "UNKNOWN_ORDER",
    "UNKNOWN_OUTCOME",
    "BinanceRest",
    "binance_code",
    "binance_msg",
]
