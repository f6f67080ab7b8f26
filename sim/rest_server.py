"""The simulator's REST side: Binance USDⓈ-M public market data and alternative.me's Fear & Greed,
served on loopback from the recorded data at the SIMULATED instant of an injected ``Clock``.

Served (GET, Binance shapes, the paths ccxt's ``binanceusdm`` calls):

- ``/fapi/v1/ping``, ``/fapi/v1/time`` (sim time), ``/fapi/v1/exchangeInfo`` (the feed's tickers as
  PERPETUAL USDT-margined symbols; tick and step sizes are the recorded prices' and volumes'
  precision; order-size and notional limits are exchange configuration, not market data, and are
  set to approximately Binance's published filters (min notional 100 / 20 / 5 USDT for BTC / ETH /
  SOL, 5 otherwise); no ``onboardDate``: not recorded).
- ``/fapi/v1/klines``: Binance's rules. No ``startTime``: the latest ``limit`` candles (ending at
  ``endTime`` when given); with ``startTime``: the first ``limit`` from it; ``endTime`` bounds the
  candles' OPEN time. ``limit`` defaults to 500; above 1500 it is clamped to 1500 (what fapi is
  understood to do; not verified against Binance from here). The candle in progress is
  included as Binance shows it (from ``SimFeed.kline_state``); nothing after sim now is ever served.
  Quote volume, trade count and taker-buy volumes are NOT recorded and are sent as zeros.
- ``/fapi/v1/premiumIndex``: ``markPrice`` is the last price, ``lastFundingRate`` the latest
  RECORDED settled rate at or before now, ``nextFundingTime`` the next 00/08/16 UTC settlement.
  ``indexPrice``, ``estimatedSettlePrice`` and ``interestRate`` are not recorded and are NOT sent
  (absent keys; a client must treat them as unavailable, never as a zero basis).
- ``/fapi/v1/fundingRate``: recorded settlements (``startTime``/``endTime``/``limit``, default 100,
  max 1000); ``markPrice`` there is the last price at the settlement instant (same proxy as above).
- ``/fapi/v1/ticker/24hr``: rolling 24 h of sim time at 5m resolution (open = first 5m bar opening
  at or after now - 24 h, plus the bar in progress). ``quoteVolume``, ``weightedAvgPrice``,
  ``lastQty``, ``count``, ``firstId``, ``lastId`` are not recorded: sent as zeros.
- ``/fapi/v1/ticker/price``.
- ``/api/v3/klines`` (Binance SPOT) for PAXGUSDT 1h / 4h, the gold hedge's recorded spot candles:
  closed candles only (``sim.recorded_spot``); other symbols -1121, other intervals -1120.
- ``/fng/`` shaped like alternative.me (``limit``, 0 = all; ``date_format`` us/cn/kr/world):
  the values at or before sim now, newest first. A daily value is current for 24 h; once the
  recording is over (after 2025-06-26) or before it starts, the answer is alternative.me's error
  shape: HTTP 200, ``"data": []`` and ``"metadata": {"error": "..."}``.

Not recorded, answered "not available": HTTP 404 with Binance's error shape
``{"code": -1020, "msg": "<what> is not available in the recorded data ..."}`` (-1020 is Binance's
"This operation is not supported."; ccxt raises ``BadRequest``, which is not retryable) for
``/fapi/v1/openInterest``, ``/futures/data/openInterestHist``, ``/futures/data/basis``, the
long/short ratio and taker ratio endpoints, mark/index/premium-index klines and liquidation orders.
A symbol parameter is validated first (an unknown symbol is -1121 as usual).

Errors like Binance: unknown symbol 400 ``{"code":-1121,"msg":"Invalid symbol."}``, bad interval
-1120, malformed number -1100, missing parameter -1102, ``startTime > endTime`` -1023, limit < 1
-1130. Every ``/fapi`` and ``/futures/data`` answer carries ``X-MBX-USED-WEIGHT-1M``; weights follow
Binance's tables (klines by limit 1/2/5/10, ticker/24hr 1 or 40 without symbol, ticker/price 1 or
2, premiumIndex 1 or 10, others 1) and the budget runs on sim minutes (see ``sim.rest_faults``).
"""

from __future__ import annotations

import ipaddress
import logging
import re
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import orjson
from aiohttp import web

from core.clock import Clock, WallClock
from market.recorded import load_fear_greed, load_funding
from market.timeframes import TIMEFRAME_MS, to_binance_symbol
from sim.feed import KlineState, SimFeed
from sim.orders import SimOrders
from sim.recorded_spot import SPOT_INTERVALS, SPOT_SYMBOLS, RecordedSpotKlines
from sim.rest_faults import DEFAULT_WEIGHT_LIMIT_1M, Fault, RestFaults, WeightLimiter
from sim.rest_payloads import (
    FearGreedBook,
    exchange_info,
    format_price,
    format_qty,
    kline_row,
    premium_index_row,
)

log = logging.getLogger(__name__)

KLINES_DEFAULT_LIMIT: Final = 500
KLINES_MAX_LIMIT: Final = 1500
FUNDING_DEFAULT_LIMIT: Final = 100
FUNDING_MAX_LIMIT: Final = 1000
DAY_MS: Final = 86_400_000
NOT_AVAILABLE_CODE: Final = -1020

#: weight of a klines request by its (clamped) limit, as Binance publishes it
_KLINES_WEIGHT_BY_LIMIT: Final = ((99, 1), (499, 2), (1000, 5))
#: endpoint -> (weight with a symbol, weight without one)
_WEIGHTS: Final[dict[str, tuple[int, int]]] = {
    "/fapi/v1/ticker/24hr": (1, 40),
    "/fapi/v1/ticker/price": (1, 2),
    "/fapi/v1/premiumIndex": (1, 10),
}

_NOT_RECORDED: Final[dict[str, str]] = {
    "/fapi/v1/openInterest": "open interest",
    "/futures/data/openInterestHist": "open interest history",
    "/futures/data/topLongShortAccountRatio": "top trader long/short account ratio",
    "/futures/data/topLongShortPositionRatio": "top trader long/short position ratio",
    "/futures/data/globalLongShortAccountRatio": "global long/short account ratio",
    "/futures/data/takerlongshortRatio": "taker buy/sell volume",
    "/futures/data/basis": "basis",
    "/fapi/v1/markPriceKlines": "mark price klines",
    "/fapi/v1/indexPriceKlines": "index price klines",
    "/fapi/v1/premiumIndexKlines": "premium index klines",
    "/fapi/v1/allForceOrders": "liquidation orders",
}

_INT_RE: Final = re.compile(r"^-?[0-9]{1,20}$")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class ApiError(Exception):
    """A Binance-shaped error answer: HTTP ``status`` with ``{"code": code, "msg": msg}``."""

    def __init__(self, code: int, msg: str, status: int = 400) -> None:
        super().__init__(msg)
        self.code, self.msg, self.status = code, msg, status

    def response(self) -> web.Response:
        return _json({"code": self.code, "msg": self.msg}, status=self.status)


def not_available(what: str) -> ApiError:
    return ApiError(
        NOT_AVAILABLE_CODE,
        f"{what} is not available in the recorded data (the simulator replays only recorded "
        "OHLCV klines, funding rates and the Fear & Greed index)",
        status=404,
    )


def request_weight(path: str, query: Mapping[str, str]) -> int:
    """Binance's request weight of a GET to ``path`` with ``query``."""
    if path == "/fapi/v1/klines":
        raw = query.get("limit", "")
        limit = int(raw) if _INT_RE.match(raw) else KLINES_DEFAULT_LIMIT
        limit = min(limit, KLINES_MAX_LIMIT)
        return next((w for top, w in _KLINES_WEIGHT_BY_LIMIT if limit <= top), 10)
    if path in _WEIGHTS:
        with_symbol, without = _WEIGHTS[path]
        return with_symbol if query.get("symbol") else without
    return 1


def _json(payload: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(payload), status=status, content_type="application/json")


def _int_param(query: Mapping[str, str], name: str, default: int | None = None) -> int | None:
    raw = query.get(name)
    if raw is None or raw == "":
        return default
    if not _INT_RE.match(raw):
        raise ApiError(
            -1100,
            f"Illegal characters found in parameter '{name}'; legal range is '^[0-9]{{1,20}}$'.",
        )
    return int(raw)


class RestServer:
    """Binance USDⓈ-M public REST + alternative.me Fear & Greed over the recorded data, on loopback."""

    def __init__(
        self,
        clock: Clock,
        feed: SimFeed,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        data_dir: Path | None = None,
        weight_limit_1m: int = DEFAULT_WEIGHT_LIMIT_1M,
        requests_after_429_before_ban: int = 3,
    ) -> None:
        if not ipaddress.ip_address(host).is_loopback:
            raise ValueError(f"the simulator listens on loopback only, not {host!r}")
        self._clock = clock
        self._feed = feed
        self._host, self._port = host, port
        self._real_clock = WallClock()  # injected delays are real seconds: a slow server
        self.faults = RestFaults()
        self.limiter = WeightLimiter(
            weight_limit_1m, requests_after_429_before_ban=requests_after_429_before_ban
        )
        #: requests received, by path (faulted and refused ones included)
        self.requests: Counter[str] = Counter()
        self._symbols = {to_binance_symbol(t): t for t in feed.tickers}
        self._funding: dict[str, tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]] = {}
        for ticker in feed.tickers:
            frame = load_funding(ticker, data_dir)
            self._funding[ticker] = (
                frame.index.to_numpy(dtype=np.int64),
                frame["funding_rate"].to_numpy(dtype=np.float64),
            )
        fng = load_fear_greed(data_dir)
        self._fear_greed_book = FearGreedBook(fng)
        self._spot = RecordedSpotKlines(data_dir)
        self._runner: web.AppRunner | None = None
        self._bound_port: int | None = None
        self.orders = SimOrders(clock, feed)  # signed order endpoints (sim/orders.py)

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def url(self) -> str:
        if self._bound_port is None:
            raise RuntimeError("RestServer is not started")
        return f"http://{self._host}:{self._bound_port}"

    async def start(self) -> None:
        if self._runner is not None:
            raise RuntimeError("RestServer already started")
        app = web.Application(middlewares=[self._middleware])
        routes = {
            "/fapi/v1/ping": self._ping,
            "/fapi/v1/time": self._time,
            "/fapi/v1/exchangeInfo": self._exchange_info,
            "/fapi/v1/klines": self._klines,
            "/fapi/v1/premiumIndex": self._premium_index,
            "/fapi/v1/fundingRate": self._funding_rate,
            "/fapi/v1/ticker/24hr": self._ticker_24h,
            "/fapi/v1/ticker/price": self._ticker_price,
            "/fng/": self._fear_greed,
            "/fng": self._fear_greed,
            "/api/v3/klines": self._spot_klines,
        }
        for path in _NOT_RECORDED:
            routes[path] = self._not_recorded
        for path, handler in routes.items():
            app.router.add_get(path, handler)
        self.orders.register(app)  # order routes: sim/orders.py
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        site = web.TCPSite(runner, self._host, self._port)
        await site.start()
        self._runner = runner
        self._bound_port = int(runner.addresses[0][1])
        log.info("sim REST server listening on %s", self.url)

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
            log.info("sim REST server on port %s stopped", self._bound_port)

    async def __aenter__(self) -> RestServer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    # -- faults, weights, errors ---------------------------------------------------------------

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        path = request.path
        self.requests[path] += 1
        is_binance = path.startswith(("/fapi/", "/futures/data/"))
        fault = self.faults.take(path)
        if fault is not None:
            if fault.delay_secs > 0:
                await self._real_clock.sleep(fault.delay_secs)
            if fault.status is not None:
                return self._fault_response(fault, request)
        if not is_binance:
            return await handler(request)
        client = request.remote or "unknown"
        verdict = self.limiter.admit(
            client, request_weight(path, request.query), self._clock.now_ms()
        )
        response: web.StreamResponse
        if verdict.status == 429:
            response = _json(self._too_many(client), status=429)
            response.headers["Retry-After"] = str(verdict.retry_after_secs)
        elif verdict.status == 418:
            response = _json(self._banned(client, verdict.banned_until_ms), status=418)
            response.headers["Retry-After"] = str(verdict.retry_after_secs)
        else:
            try:
                response = await handler(request)
            except ApiError as exc:
                response = exc.response()
        response.headers["X-MBX-USED-WEIGHT-1M"] = str(verdict.used_weight)
        return response

    def _too_many(self, client: str) -> dict[str, Any]:
        return {
            "code": -1003,
            "msg": f"Too many requests; current limit of IP({client}) is "
            f"{self.limiter.limit_1m} requests per minute. Please use the websocket for live "
            "updates to avoid polling the API.",
        }

    @staticmethod
    def _banned(client: str, until_ms: int) -> dict[str, Any]:
        return {
            "code": -1003,
            "msg": f"Way too many requests; IP({client}) banned until {until_ms}. Please use the "
            "websocket for live updates to avoid bans.",
        }

    def _fault_response(self, fault: Fault, request: web.Request) -> web.Response:
        client = request.remote or "unknown"
        now_ms = self._clock.now_ms()
        if fault.status == 429:
            response = _json(self._too_many(client), status=429)
        elif fault.status == 418:
            until_ms = now_ms + fault.retry_after_secs * 1000
            response = _json(self._banned(client, until_ms), status=418)
        elif fault.status == 500:
            body = {"code": -1001, "msg": "Internal error; unable to process your request."}
            response = _json(body, status=500)
        elif fault.status == 503:
            body = {"code": -1008, "msg": "Server is currently overloaded with other requests."}
            response = _json(body, status=503)
        else:  # 502 comes from the load balancer, not the API: an HTML page
            response = web.Response(
                text="<html><body><h1>502 Bad Gateway</h1></body></html>",
                status=502,
                content_type="text/html",
            )
        if fault.status in (418, 429):
            response.headers["Retry-After"] = str(fault.retry_after_secs)
        response.headers["X-MBX-USED-WEIGHT-1M"] = str(self.limiter.used_weight(client, now_ms))
        return response

    def _ticker(self, query: Mapping[str, str], *, required: bool) -> str | None:
        symbol = query.get("symbol")
        if not symbol:
            if required:
                raise ApiError(
                    -1102,
                    "Mandatory parameter 'symbol' was not sent, was empty/null, or malformed.",
                )
            return None
        ticker = self._symbols.get(symbol)
        if ticker is None:
            raise ApiError(-1121, "Invalid symbol.")
        return ticker

    def _tickers(self, query: Mapping[str, str]) -> tuple[str | None, list[str]]:
        ticker = self._ticker(query, required=False)
        return ticker, [ticker] if ticker is not None else list(self._feed.tickers)

    def _price(self, ticker: str, value: float) -> str:
        return format_price(self._feed, ticker, value)

    def _qty(self, ticker: str, value: float) -> str:
        return format_qty(self._feed, ticker, value)

    # -- endpoints ---------------------------------------------------------------------------

    async def _ping(self, request: web.Request) -> web.Response:
        return _json({})

    async def _time(self, request: web.Request) -> web.Response:
        return _json({"serverTime": self._clock.now_ms()})

    async def _not_recorded(self, request: web.Request) -> web.Response:
        self._ticker(request.query, required=False)
        raise not_available(_NOT_RECORDED[request.path])

    async def _exchange_info(self, request: web.Request) -> web.Response:
        return _json(
            exchange_info(self._clock.now_ms(), self.limiter.limit_1m, self._symbols, self._feed)
        )

    async def _spot_klines(self, request: web.Request) -> web.Response:
        """Binance SPOT klines of the recorded spot symbols (PAXGUSDT), closed candles only.
        Spot is not /fapi: no USDⓈ-M weight is charged, so errors are answered here."""
        query = request.query
        symbol, interval = query.get("symbol", ""), query.get("interval", "")
        try:
            if symbol not in SPOT_SYMBOLS:
                raise ApiError(-1121, "Invalid symbol.")
            if interval not in SPOT_INTERVALS:
                raise ApiError(-1120, "Invalid interval.")
            limit = _int_param(query, "limit", KLINES_DEFAULT_LIMIT) or 0
            if limit < 1:
                raise ApiError(-1130, "Data sent for parameter 'limit' is not valid.")
        except ApiError as exc:
            return exc.response()
        return _json(self._spot.answer(symbol, interval, min(limit, 1000), self._clock.now_ms()))

    async def _klines(self, request: web.Request) -> web.Response:
        query = request.query
        ticker = self._ticker(query, required=True)
        assert ticker is not None
        interval = query.get("interval")
        if not interval:
            raise ApiError(
                -1102, "Mandatory parameter 'interval' was not sent, was empty/null, or malformed."
            )
        if interval not in TIMEFRAME_MS:
            raise ApiError(-1120, "Invalid interval.")
        limit = _int_param(query, "limit", KLINES_DEFAULT_LIMIT)
        assert limit is not None
        if limit < 1:
            raise ApiError(-1130, "Data sent for parameter 'limit' is not valid.")
        limit = min(limit, KLINES_MAX_LIMIT)  # Binance clamps rather than refuses
        start_ms = _int_param(query, "startTime")
        end_ms = _int_param(query, "endTime")
        if start_ms is not None and end_ms is not None and start_ms > end_ms:
            raise ApiError(-1023, "Start time is greater than end time.")
        candles = self.klines(ticker, interval, start_ms, end_ms, limit, self._clock.now_ms())
        return _json([kline_row(self._feed, c) for c in candles])

    def klines(
        self,
        ticker: str,
        timeframe: str,
        start_ms: int | None,
        end_ms: int | None,
        limit: int,
        now_ms: int,
    ) -> list[KlineState]:
        """What ``/fapi/v1/klines`` serves at ``now_ms``: closed candles plus the one in progress."""
        if start_ms is not None and start_ms > now_ms:
            return []
        last_open_ms = now_ms if end_ms is None else min(end_ms, now_ms)
        tf_ms = TIMEFRAME_MS[timeframe]
        # closed_candles bounds CLOSE times; Binance's endTime bounds OPEN times
        candles = self._feed.closed_candles(
            ticker, timeframe, start_ms, min(last_open_ms + tf_ms - 1, now_ms), limit
        )
        current = self._feed.kline_state(ticker, timeframe, now_ms)
        if (
            current is not None
            and current.open_time_ms <= last_open_ms
            and (start_ms is None or current.open_time_ms >= start_ms)
            and (not candles or current.open_time_ms > candles[-1].open_time_ms)
            and (start_ms is None or len(candles) < limit)
        ):
            candles.append(current)
        return candles if start_ms is not None else candles[-limit:]

    def _priced_tickers(
        self, request: web.Request
    ) -> tuple[str | None, int, list[tuple[str, float]]]:
        """(the one symbol asked for or None, now, [(ticker, price now)]). A price missing for an
        asked-for symbol is "not available"; for the all-symbols form it is just left out."""
        asked, tickers = self._tickers(request.query)
        now_ms = self._clock.now_ms()
        priced = []
        for ticker in tickers:
            price = self._feed.last_price(ticker, now_ms)
            if price is None:
                if asked is not None:
                    raise not_available(f"the {ticker} price at {now_ms}")
                continue
            priced.append((ticker, price))
        return asked, now_ms, priced

    async def _premium_index(self, request: web.Request) -> web.Response:
        asked, tickers = self._tickers(request.query)
        now_ms = self._clock.now_ms()
        rows = []
        for ticker in tickers:
            row = premium_index_row(self._feed, ticker, now_ms)
            if row is None:  # no price: "not available" if asked for, else left out
                if asked is not None:
                    raise not_available(f"the {ticker} price at {now_ms}")
                continue
            rows.append(row)
        return _json(rows[0] if asked is not None else rows)

    async def _funding_rate(self, request: web.Request) -> web.Response:
        query = request.query
        _, tickers = self._tickers(query)
        limit = _int_param(query, "limit", FUNDING_DEFAULT_LIMIT)
        assert limit is not None
        if limit < 1:
            raise ApiError(-1130, "Data sent for parameter 'limit' is not valid.")
        limit = min(limit, FUNDING_MAX_LIMIT)
        start_ms = _int_param(query, "startTime")
        end_ms = _int_param(query, "endTime")
        if start_ms is not None and end_ms is not None and start_ms > end_ms:
            raise ApiError(-1023, "Start time is greater than end time.")
        now_ms = self._clock.now_ms()
        last_ms = now_ms if end_ms is None else min(end_ms, now_ms)
        rows = sorted(
            self._funding_rows(tickers, start_ms, last_ms),
            key=lambda r: (r["fundingTime"], r["symbol"]),
        )
        return _json(rows[:limit] if start_ms is not None else rows[-limit:])

    def _funding_rows(
        self, tickers: Iterable[str], start_ms: int | None, last_ms: int
    ) -> Iterable[dict[str, Any]]:
        for ticker in tickers:
            times, rates = self._funding[ticker]
            lo = 0 if start_ms is None else int(np.searchsorted(times, start_ms, side="left"))
            hi = int(np.searchsorted(times, last_ms, side="right"))
            for i in range(lo, hi):
                at_ms = int(times[i])
                row: dict[str, Any] = {
                    "symbol": to_binance_symbol(ticker),
                    "fundingTime": at_ms,
                    "fundingRate": f"{rates.item(i):.8f}",
                }
                price = self._feed.last_price(ticker, at_ms)
                if price is not None:
                    row["markPrice"] = self._price(ticker, price)
                yield row

    async def _ticker_24h(self, request: web.Request) -> web.Response:
        asked, tickers = self._tickers(request.query)
        now_ms = self._clock.now_ms()
        rows = []
        for ticker in tickers:
            row = self._rolling_24h(ticker, now_ms)
            if row is None:
                if asked is not None:
                    raise not_available(f"the {ticker} 24h ticker at {now_ms}")
                continue
            rows.append(row)
        return _json(rows[0] if asked is not None else rows)

    def _rolling_24h(self, ticker: str, now_ms: int) -> dict[str, Any] | None:
        base, bar_ms = self._feed.base_interval, self._feed.bar_ms
        current = self._feed.kline_state(ticker, base, now_ms)
        if current is None:
            return None
        first_open_ms = -(-(now_ms - DAY_MS) // bar_ms) * bar_ms
        bars = self._feed.closed_candles(ticker, base, first_open_ms, now_ms, DAY_MS // bar_ms)
        if not bars or current.open_time_ms > bars[-1].open_time_ms:
            bars.append(current)
        open_price, last_price = bars[0].open, current.close
        change = last_price - open_price
        return {
            "symbol": to_binance_symbol(ticker),
            "priceChange": self._price(ticker, change),
            "priceChangePercent": f"{100.0 * change / open_price:.3f}",
            "weightedAvgPrice": "0",  # needs quote volume: not recorded
            "lastPrice": self._price(ticker, last_price),
            "lastQty": "0",  # not recorded
            "openPrice": self._price(ticker, open_price),
            "highPrice": self._price(ticker, max(b.high for b in bars)),
            "lowPrice": self._price(ticker, min(b.low for b in bars)),
            "volume": self._qty(ticker, sum(b.volume for b in bars)),
            "quoteVolume": "0",  # not recorded
            "openTime": bars[0].open_time_ms,
            "closeTime": now_ms,
            "firstId": 0,  # trade ids: not recorded
            "lastId": 0,
            "count": 0,  # trade count: not recorded
        }

    async def _ticker_price(self, request: web.Request) -> web.Response:
        asked, now_ms, priced = self._priced_tickers(request)
        rows = [
            {"symbol": to_binance_symbol(t), "price": self._price(t, price), "time": now_ms}
            for t, price in priced
        ]
        return _json(rows[0] if asked is not None else rows)

    async def _fear_greed(self, request: web.Request) -> web.Response:
        return _json(self._fear_greed_book.answer(request.query, self._clock.now_ms() // 1000))


__all__ = ["NOT_AVAILABLE_CODE", "ApiError", "RestServer", "not_available", "request_weight"]
