"""The simulator's signed USDⓈ-M order endpoints (Binance shapes), over ``sim.order_book.OrderBook``.

Served (the paths ccxt's ``binanceusdm`` signs and calls): POST/GET/DELETE ``/fapi/v1/order``
(LIMIT GTC and MARKET, ``newClientOrderId``, ``reduceOnly``), GET ``/fapi/v1/openOrders``,
GET ``/fapi/v1/userTrades``, GET ``/fapi/v2/account`` and ``/fapi/v3/account``, GET
``/fapi/v2/positionRisk`` and ``/fapi/v3/positionRisk``, POST ``/fapi/v1/leverage`` (only the
configured leverage is accepted: the sim's account has one leverage for every symbol), GET
``/fapi/v1/positionSide/dual`` (always one-way mode).

Every request is checked like Binance does: ``X-MBX-APIKEY`` must be the test key (-2015), the
``signature`` must be HMAC-SHA256 with the test secret over the query string followed by the body
(everything before ``&signature=``; -1022), and ``timestamp`` must be within ``recvWindow`` (default
5000, max 60000) of the SIM clock and not more than 1000 ms ahead of it (-1021).

Test faults: ``SimOrders.fail_after_accept(n, status)`` makes the next ``n`` order placements take
effect and THEN answer a 5xx, the case a client must resolve by looking the order up.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final
from urllib.parse import parse_qsl

import orjson
from aiohttp import web

from core.clock import Clock
from market.timeframes import to_binance_symbol
from sim.feed import SimFeed
from sim.order_book import OrderBook, OrderRejected, SimAccountConfig, SimOrder, SimTrade

log = logging.getLogger(__name__)

#: the sim's test key pair (not a secret: it only opens the loopback simulator)
TEST_API_KEY: Final = "vigil-sim-test-key-000000000000000000000000000000000000000000000000"
TEST_API_SECRET: Final = "vigil-sim-test-secret-0000000000000000000000000000000000000000000000"
DEFAULT_RECV_WINDOW_MS: Final = 5_000
MAX_RECV_WINDOW_MS: Final = 60_000
MAX_AHEAD_MS: Final = 1_000
_CLIENT_ID_RE: Final = re.compile(r"^[.A-Z:/a-z0-9_-]{1,36}$")
_NUMBER_RE: Final = re.compile(r"^[0-9]+(\.[0-9]+)?$")

Handler = Callable[[web.Request, dict[str, str]], Awaitable[Any]]


def _num(value: float) -> str:
    """Full float precision (``repr``): fills are not rounded to the tick by the sim."""
    return repr(float(value))


def _error(code: int, msg: str, status: int = 400) -> web.Response:
    return web.Response(
        body=orjson.dumps({"code": code, "msg": msg}),
        status=status,
        content_type="application/json",
    )


class SimOrders:
    """The order routes plus a Python handle for tests (``book``, ``trade``, faults)."""

    def __init__(
        self,
        clock: Clock,
        feed: SimFeed,
        *,
        api_key: str = TEST_API_KEY,
        api_secret: str = TEST_API_SECRET,
        config: SimAccountConfig | None = None,
    ) -> None:
        self._clock = clock
        self._api_key, self._api_secret = api_key, api_secret.encode()
        symbols = {to_binance_symbol(t): t for t in feed.tickers}
        self.book = OrderBook(
            symbols, lambda t: feed.last_price(t, clock.now_ms()), clock.now_ms, config
        )
        self._fail_after_accept: list[int] = []
        #: order placements that took effect (faulted ones included), for tests
        self.placed_count = 0
        #: Binance error codes answered, for tests
        self.rejections: Counter[int] = Counter()

    def fail_after_accept(self, count: int = 1, status: int = 503) -> None:
        """The next ``count`` placements are accepted, then answered with HTTP ``status``."""
        self._fail_after_accept.extend([status] * count)

    def trade(self, ticker: str, *, low: float, high: float, close: float) -> None:
        self.book.trade(ticker, low=low, high=high, close=close)

    def register(self, app: web.Application) -> None:
        routes: list[tuple[str, str, Handler]] = [
            ("POST", "/fapi/v1/order", self._new_order),
            ("GET", "/fapi/v1/order", self._query_order),
            ("DELETE", "/fapi/v1/order", self._cancel_order),
            ("GET", "/fapi/v1/openOrders", self._open_orders),
            ("GET", "/fapi/v1/userTrades", self._user_trades),
            ("GET", "/fapi/v2/account", self._account),
            ("GET", "/fapi/v3/account", self._account),
            ("GET", "/fapi/v2/positionRisk", self._position_risk),
            ("GET", "/fapi/v3/positionRisk", self._position_risk),
            ("POST", "/fapi/v1/leverage", self._leverage),
            ("GET", "/fapi/v1/positionSide/dual", self._position_mode),
        ]
        for method, path, handler in routes:
            app.router.add_route(method, path, self._signed(handler))

    # -- authentication ------------------------------------------------------------------------

    def _signed(self, handler: Handler) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        async def endpoint(request: web.Request) -> web.StreamResponse:
            body = (await request.text()) if request.can_read_body else ""
            try:
                params = self._authenticate(request, body)
                self.book.sweep()
                payload = await handler(request, params)
            except OrderRejected as exc:
                self.rejections[exc.code] += 1
                return _error(exc.code, exc.msg, status=401 if exc.code == -2015 else 400)
            if isinstance(payload, web.StreamResponse):
                return payload
            return web.Response(body=orjson.dumps(payload), content_type="application/json")

        return endpoint

    def _authenticate(self, request: web.Request, body: str) -> dict[str, str]:
        if request.headers.get("X-MBX-APIKEY") != self._api_key:
            raise OrderRejected(-2015, "Invalid API-key, IP, or permissions for action.")
        total = request.query_string + body
        signed, sep, signature = total.rpartition("&signature=")
        if not sep or not signature:
            raise OrderRejected(-1102, "Mandatory parameter 'signature' was not sent.")
        expected = hmac.new(self._api_secret, signed.encode(), hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected, signature):
            raise OrderRejected(-1022, "Signature for this request is not valid.")
        params = dict(parse_qsl(signed, keep_blank_values=True))
        timestamp = _int(params, "timestamp", required=True)
        window = _int(params, "recvWindow") or DEFAULT_RECV_WINDOW_MS
        if window > MAX_RECV_WINDOW_MS:
            raise OrderRejected(-1131, "recvWindow must be less than 60000")
        now = self._clock.now_ms()
        assert timestamp is not None
        if timestamp >= now + MAX_AHEAD_MS or now - timestamp > window:
            raise OrderRejected(-1021, "Timestamp for this request is outside of the recvWindow.")
        return params

    # -- handlers ------------------------------------------------------------------------------

    async def _new_order(self, request: web.Request, p: dict[str, str]) -> Any:
        symbol = _required(p, "symbol")
        side = _required(p, "side")
        order_type = _required(p, "type")
        if side not in ("BUY", "SELL"):
            raise OrderRejected(-1117, "Invalid side.")
        if order_type not in ("LIMIT", "MARKET"):
            raise OrderRejected(-1116, "Invalid orderType.")
        price: float | None = None
        if order_type == "LIMIT":
            if p.get("timeInForce", "GTC") != "GTC":
                raise OrderRejected(-1115, "Invalid timeInForce (the sim supports GTC only).")
            price = _float(p, "price")
        client_id = p.get("newClientOrderId") or f"sim-{self.placed_count + 1}"
        if not _CLIENT_ID_RE.fullmatch(client_id):
            raise OrderRejected(-1100, "Illegal characters found in parameter 'newClientOrderId'.")
        order = self.book.place(
            symbol=symbol,
            side=side,  # type: ignore[arg-type]  # checked above
            order_type=order_type,  # type: ignore[arg-type]
            quantity=_float(p, "quantity"),
            price=price,
            client_order_id=client_id,
            reduce_only=p.get("reduceOnly", "false").lower() == "true",
        )
        self.placed_count += 1
        if self._fail_after_accept:
            status = self._fail_after_accept.pop(0)
            log.info("sim fault: order %s accepted, answering %d", client_id, status)
            return _error(-1001, "Internal error; unable to process your request.", status)
        return self._order_json(order)

    async def _query_order(self, request: web.Request, p: dict[str, str]) -> Any:
        return self._order_json(self._find(p))

    async def _cancel_order(self, request: web.Request, p: dict[str, str]) -> Any:
        try:
            order = self._find(p)
        except OrderRejected:
            raise OrderRejected(-2011, "Unknown order sent.") from None
        return self._order_json(self.book.cancel(order))

    async def _open_orders(self, request: web.Request, p: dict[str, str]) -> Any:
        symbol = p.get("symbol") or None
        if symbol is not None:
            self.book.ticker_of(symbol)
        return [self._order_json(o) for o in self.book.open_orders(symbol)]

    async def _user_trades(self, request: web.Request, p: dict[str, str]) -> Any:
        symbol = _required(p, "symbol")
        self.book.ticker_of(symbol)
        return [_trade_json(t) for t in self.book.trades(symbol, _int(p, "orderId"))]

    async def _account(self, request: web.Request, p: dict[str, str]) -> Any:
        book = self.book
        wallet, margin = book.wallet_usd(), book.margin_balance_usd()
        available = book.available_usd()
        position_margin = margin - available - book.open_order_margin_usd()
        usdt = {
            "asset": "USDT",
            "walletBalance": _num(wallet),
            "unrealizedProfit": _num(margin - wallet),
            "marginBalance": _num(margin),
            "maintMargin": "0",
            "initialMargin": _num(margin - available),
            "positionInitialMargin": _num(position_margin),
            "openOrderInitialMargin": _num(book.open_order_margin_usd()),
            "crossWalletBalance": _num(wallet),
            "crossUnPnl": _num(margin - wallet),
            "availableBalance": _num(available),
            "maxWithdrawAmount": _num(max(0.0, available)),
            "updateTime": self._clock.now_ms(),
        }
        return {
            "totalInitialMargin": usdt["initialMargin"],
            "totalMaintMargin": "0",
            "totalWalletBalance": usdt["walletBalance"],
            "totalUnrealizedProfit": usdt["unrealizedProfit"],
            "totalMarginBalance": usdt["marginBalance"],
            "totalPositionInitialMargin": usdt["positionInitialMargin"],
            "totalOpenOrderInitialMargin": usdt["openOrderInitialMargin"],
            "totalCrossWalletBalance": usdt["crossWalletBalance"],
            "totalCrossUnPnl": usdt["crossUnPnl"],
            "availableBalance": usdt["availableBalance"],
            "maxWithdrawAmount": usdt["maxWithdrawAmount"],
            "assets": [usdt],
            "positions": [self._position_json(s) for s, pos in book.positions() if pos.amount],
        }

    async def _position_risk(self, request: web.Request, p: dict[str, str]) -> Any:
        wanted = p.get("symbol") or None
        return [
            self._position_json(symbol)
            for symbol, position in self.book.positions()
            if position.amount and (wanted is None or symbol == wanted)
        ]

    async def _leverage(self, request: web.Request, p: dict[str, str]) -> Any:
        symbol = _required(p, "symbol")
        self.book.ticker_of(symbol)
        leverage = _int(p, "leverage", required=True)
        if leverage != self.book.config.leverage:
            raise OrderRejected(
                -4028,
                f"Leverage {leverage} is not valid (the sim runs at {self.book.config.leverage}x).",
            )
        return {"leverage": leverage, "maxNotionalValue": "1000000000", "symbol": symbol}

    async def _position_mode(self, request: web.Request, p: dict[str, str]) -> Any:
        return {"dualSidePosition": False}  # the sim's account is always one-way

    # -- shapes --------------------------------------------------------------------------------

    def _find(self, p: Mapping[str, str]) -> SimOrder:
        symbol = _required(p, "symbol")
        self.book.ticker_of(symbol)
        order_id = _int(p, "orderId")
        client_id = p.get("origClientOrderId") or None
        if order_id is None and client_id is None:
            raise OrderRejected(
                -1102, "Param 'origClientOrderId' or 'orderId' must be sent, but both were empty."
            )
        return self.book.find(symbol, order_id, client_id)

    def _order_json(self, o: SimOrder) -> dict[str, Any]:
        return {
            "orderId": o.order_id,
            "symbol": o.symbol,
            "status": o.status,
            "clientOrderId": o.client_order_id,
            "price": _num(o.price),
            "avgPrice": _num(o.avg_price),
            "origQty": _num(o.quantity),
            "executedQty": _num(o.executed_qty),
            "cumQty": _num(o.executed_qty),
            "cumQuote": _num(o.executed_qty * o.avg_price),
            "timeInForce": "GTC",
            "type": o.type,
            "origType": o.type,
            "reduceOnly": o.reduce_only,
            "closePosition": False,
            "side": o.side,
            "positionSide": "BOTH",
            "stopPrice": "0",
            "workingType": "CONTRACT_PRICE",
            "priceProtect": False,
            "priceMatch": "NONE",
            "selfTradePreventionMode": "NONE",
            "goodTillDate": 0,
            "time": o.time_ms,
            "updateTime": o.update_time_ms,
        }

    def _position_json(self, symbol: str) -> dict[str, Any]:
        book = self.book
        position = dict(book.positions())[symbol]
        mark = book.price(book.ticker_of(symbol))
        return {
            "symbol": symbol,
            "positionSide": "BOTH",
            "positionAmt": _num(position.amount),
            "entryPrice": _num(position.entry_price),
            "breakEvenPrice": _num(position.entry_price),
            "markPrice": _num(mark),
            "unRealizedProfit": _num(book.unrealized_usd(symbol)),
            "liquidationPrice": "0",
            "isolatedMargin": "0",
            "notional": _num(position.amount * mark),
            "marginAsset": "USDT",
            "isolatedWallet": "0",
            "initialMargin": _num(book.position_margin_usd(symbol)),
            "maintMargin": "0",
            "positionInitialMargin": _num(book.position_margin_usd(symbol)),
            "openOrderInitialMargin": "0",
            "adl": 0,
            "bidNotional": "0",
            "askNotional": "0",
            "leverage": str(book.config.leverage),
            "marginType": "cross",
            "isAutoAddMargin": "false",
            "maxNotionalValue": "1000000000",
            "updateTime": position.update_time_ms,
        }


def _trade_json(t: SimTrade) -> dict[str, Any]:
    return {
        "buyer": t.side == "BUY",
        "commission": _num(t.commission_usd),
        "commissionAsset": "USDT",
        "id": t.trade_id,
        "maker": t.maker,
        "orderId": t.order_id,
        "price": _num(t.price),
        "qty": _num(t.qty),
        "quoteQty": _num(t.qty * t.price),
        "realizedPnl": _num(t.realized_pnl_usd),
        "side": t.side,
        "positionSide": "BOTH",
        "symbol": t.symbol,
        "time": t.time_ms,
    }


def _required(p: Mapping[str, str], name: str) -> str:
    value = p.get(name)
    if not value:
        raise OrderRejected(
            -1102, f"Mandatory parameter '{name}' was not sent, was empty/null, or malformed."
        )
    return value


def _int(p: Mapping[str, str], name: str, *, required: bool = False) -> int | None:
    raw = p.get(name)
    if not raw:
        if required:
            _required(p, name)
        return None
    if not raw.isdigit() or len(raw) > 20:
        raise OrderRejected(-1100, f"Illegal characters found in parameter '{name}'.")
    return int(raw)


def _float(p: Mapping[str, str], name: str) -> float:
    raw = _required(p, name)
    if not _NUMBER_RE.fullmatch(raw):
        raise OrderRejected(-1100, f"Illegal characters found in parameter '{name}'.")
    return float(raw)


__all__ = ["TEST_API_KEY", "TEST_API_SECRET", "SimOrders"]
