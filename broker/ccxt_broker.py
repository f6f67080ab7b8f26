"""CcxtBroker: the Broker port on Binance USDⓈ-M through ccxt's async ``binanceusdm``.

Order rules (the broker contract's, the same as the paper broker's): a BUY is a LIMIT GTC at the
intent's reference price for ``notional / price`` rounded down to the lot step; a SELL is a
reduce-only MARKET order for the whole long position. One cross-margined USDT account at
``leverage`` (1x by default, set per ticker on start), so margin is cash: ``get_cash`` is Binance's
``availableBalance`` (0 when it is below 0), ``get_portfolio_value`` its ``totalMarginBalance``
(wallet + unrealized PnL; a negative one is refused as an unreadable answer).

Never two orders for one intent: see ``broker.ccxt_orders`` (placing, journaling, reading back).

``reconcile()`` runs before anything else (every port method calls it once if nobody did): markets,
time offset, one-way position mode (hedge mode refuses to start), leverage, every journaled order whose outcome is unknown looked up, open orders and
positions read; open orders the journal does not know (placed by a person) are reported, not
touched.

``get_open_orders`` (resting BUYs count as exposure in the risk caps) asks the exchange only while
the journal holds orders without an outcome, one ``openOrders`` request per symbol among them.

Signed requests, reading an order and its fee from the exchange: ``broker.ccxt_rest``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import ccxt.async_support as ccxt_async
from pydantic import BaseModel, ConfigDict

from broker import exchange_answer as answer
from broker.ccxt_fills import FillAnnouncer
from broker.ccxt_orders import CcxtOrders
from broker.ccxt_rest import (
    UNKNOWN_ORDER,
    BinanceRest,
    binance_code,
)
from broker.live_guard import ApiKeys, Mode
from broker.order_journal import JournalEntry, JournalIntent, OrderJournal
from broker.port import OpenOrder, OrderIntent, OrderResult, PositionDetail
from core.bus import EventBus
from core.clock import Clock
from core.errors import HaltTradingError, RefuseToStartError
from market.ccxt_client import (
    CcxtRequestRejectedError,
    RetryPolicy,
    call_with_retries,
    make_binanceusdm,
)
from market.timeframes import to_binance_symbol

log = logging.getLogger(__name__)


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
        self._policy = retry_policy or RetryPolicy(max_attempts=4, base_secs=0.5, cap_secs=10.0)
        self._rest = BinanceRest(
            exchange,
            clock,
            self._policy,
            maker_fee_pct=maker_fee_pct,
            taker_fee_pct=taker_fee_pct,
        )
        self._tickers = tuple(tickers)
        self._leverage = leverage
        self._orders = CcxtOrders(
            exchange,
            clock,
            self._rest,
            self._journal,
            self._fills,
            max_sends=max_sends,
            positions=self._positions,
        )
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
        await self._rest.sync_time()
        raw_mode = await self._rest.request(
            "fapiPrivateGetPositionSideDual", {}, what="position mode"
        )
        hedged = answer.row(raw_mode, "position mode").get("dualSidePosition")
        if hedged not in (True, False, "true", "false"):  # an unread mode is not one-way
            raise answer.MalformedAnswerError(
                f"the exchange's answer to position mode: dualSidePosition is {hedged!r}"
            )
        if hedged in (True, "true"):
            raise RefuseToStartError(
                "the Binance account is in hedge mode (dualSidePosition); vigil trades one-way "
                "positions: switch the account to one-way mode first"
            )
        for ticker in self._tickers:
            await self._rest.request(
                "fapiPrivatePostLeverage",
                {"symbol": to_binance_symbol(ticker), "leverage": self._leverage},
                what=f"set leverage {ticker}",
            )
        open_raw = await self._rest.request("fapiPrivateGetOpenOrders", {}, what="open orders")
        open_ids = tuple(
            answer.text(o, "clientOrderId", "open orders")
            for o in answer.rows(open_raw, "open orders")
        )
        resolved: list[OrderResult] = []
        never_sent: list[str] = []
        for entry in self._journal.pending():
            cid = entry.intent.client_order_id
            found = await self._orders.lookup_entry(entry)
            if found is not None:
                resolved.append(found)
            elif cid in open_ids:  # resting, whatever the lookup said: kept pending, so settled
                log.warning("order %s is open, but its lookup finds none; kept as resting", cid)
            else:
                never_sent.append(cid)
                self._journal.record_final(
                    self._orders.rejected(
                        entry.intent, "never reached the exchange (found on restart)"
                    )
                )
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

    # -- Broker port ---------------------------------------------------------------------------

    async def execute_decisions(self, intents: Sequence[OrderIntent]) -> Sequence[OrderResult]:
        await self._ready()
        async with self._lock:  # one at a time: a journal check and its send must not interleave
            return [await self._orders.execute(intent) for intent in intents]

    async def lookup(self, client_order_id: str) -> OrderResult | None:
        await self._ready()
        entry = self._journal.get(client_order_id)
        if entry is not None:
            return await self._orders.lookup_entry(entry)
        for symbol in self._rest.symbols_for(client_order_id):
            raw = await self._rest.fetch_order(symbol, client_order_id)
            if raw is not None:
                return await self._rest.order_result(raw, None)
        return None

    async def cancel(self, client_order_id: str) -> OrderResult | None:
        current = await self.lookup(client_order_id)
        if current is None or current.status != "open":
            return current
        params = {"symbol": to_binance_symbol(current.ticker), "origClientOrderId": client_order_id}
        try:
            await self._rest.request(
                "fapiPrivateDeleteOrder", params, what=f"cancel {client_order_id}"
            )
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
        account = await self._rest.request("fapiPrivateV3GetAccount", {}, what="account")
        return answer.number(
            answer.row(account, "account"), "totalMarginBalance", "account", at_least=0.0
        )

    async def get_cash(self) -> float:
        await self._ready()
        account = await self._rest.request("fapiPrivateV3GetAccount", {}, what="account")
        available = answer.number(answer.row(account, "account"), "availableBalance", "account")
        # Binance's goes below 0 when losses eat into the margin: then nothing is free to spend
        return max(0.0, available)

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
            raw = await self._rest.request(
                "fapiPrivateGetOpenOrders", {"symbol": symbol}, what=f"open orders {symbol}"
            )
            resting.update(
                (answer.text(o, "clientOrderId", "open orders"), dict(o))
                for o in answer.rows(raw, "open orders")
            )
        found: list[OpenOrder] = []
        for entry in pending:
            raw_order = resting.get(entry.intent.client_order_id)
            if raw_order is None:
                await self._orders.lookup_entry(entry)  # finished since: journal how
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
        raw = await self._rest.request("fapiPrivateV3GetPositionRisk", {}, what="positions")
        details: list[PositionDetail] = []
        symbols: set[str] = set()
        for row in answer.rows(raw, "positions"):
            amount = answer.number(row, "positionAmt", "positions")
            symbol = answer.text(row, "symbol", "positions")
            if symbol in symbols:  # one-way mode has one row a symbol: two would count it twice
                raise answer.MalformedAnswerError(
                    f"the exchange's answer to positions has two rows for {symbol}"
                )
            symbols.add(symbol)
            if amount == 0.0:
                continue
            ticker = self._rest.ticker_of(symbol)
            if amount < 0:
                raise HaltTradingError(
                    f"short position of {amount} {ticker} on the exchange; vigil is long-only"
                )
            mark = answer.number(row, "markPrice", "positions", default=0.0, at_least=0.0)
            entry = self._fills.entry_of(ticker)
            details.append(
                PositionDetail(
                    ticker=ticker,
                    quantity=amount,
                    entry_price=answer.number(row, "entryPrice", "positions", above=0.0),
                    mark_price=mark if mark > 0 else None,
                    opened_at_ms=self._opened_at_ms(
                        entry, answer.whole_number(row, "updateTime", "positions", default=0)
                    ),
                    signals=dict(entry.intent.signals) if entry is not None else {},
                    regime=entry.intent.regime if entry is not None else "",
                )
            )
        return details

    # -- plumbing ------------------------------------------------------------------------------

    @staticmethod
    def _opened_at_ms(entry: JournalEntry | None, fallback_ms: int) -> int:
        """The first BUY fill since the last SELL fill in the journal; else the exchange's
        ``updateTime`` (Binance reports no open time)."""
        if entry is None or entry.final is None:
            return fallback_ms
        return entry.final.at_ms


def _open_order(intent: JournalIntent, raw: dict[str, Any]) -> OpenOrder:
    """A resting order as Binance reports it; the time it was placed is the journal's."""
    what = f"open order {intent.client_order_id}"
    ordered = answer.number(raw, "origQty", what, at_least=0.0)
    executed = answer.number(raw, "executedQty", what, default=0.0, at_least=0.0)
    unfilled = max(0.0, ordered - executed)
    price = answer.number(raw, "price", what, default=0.0, at_least=0.0)
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


__all__ = ["CcxtBroker", "ReconcileReport", "build_exchange"]
