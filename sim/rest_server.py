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

Errors, request weights and the "not available" answer: ``sim.rest_errors``; what the recorded
market data answers (klines, funding, rolling 24 h): ``sim.rest_market``.
"""

from __future__ import annotations

import ipaddress
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Final

from aiohttp import web

from core.clock import Clock, WallClock
from core.errors import RefuseToStartError
from market.recorded import DataUnavailableError, MalformedDataError, load_fear_greed
from market.timeframes import TIMEFRAME_MS, to_binance_symbol
from sim.feed import SimFeed
from sim.orders import SimOrders
from sim.recorded_spot import SPOT_INTERVALS, SPOT_SYMBOLS, RecordedSpotKlines
from sim.rest_errors import (
    KLINES_DEFAULT_LIMIT,
    KLINES_MAX_LIMIT,
    ApiError,
    banned_body,
    fault_response,
    int_param,
    json_response,
    not_available,
    request_weight,
    rewritten,
    too_many_body,
)
from sim.rest_faults import DEFAULT_WEIGHT_LIMIT_1M, Fault, RestFaults, WeightLimiter
from sim.rest_market import FundingBook, klines, rolling_24h
from sim.rest_payloads import (
    FearGreedBook,
    exchange_info,
    fear_greed_missing,
    format_price,
    kline_row,
    premium_index_row,
)

log = logging.getLogger(__name__)

FUNDING_DEFAULT_LIMIT: Final = 100
FUNDING_MAX_LIMIT: Final = 1000


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

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


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
        self._funding = FundingBook(feed)
        # optional, as in a replay: a data dir without it was a traceback at start
        self._fear_greed_book: FearGreedBook | str
        try:
            self._fear_greed_book = FearGreedBook(load_fear_greed(data_dir))
        except DataUnavailableError as exc:
            self._fear_greed_book = str(exc)
        except MalformedDataError as exc:  # was a traceback at start
            raise RefuseToStartError(f"the simulator cannot serve Fear & Greed: {exc}") from None
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
        fault = self.faults.take(request.path)
        response = await self._answer(request, handler, fault)
        if fault is None or fault.rewrite is None:
            return response
        return rewritten(response, fault.rewrite)

    async def _answer(
        self, request: web.Request, handler: Handler, fault: Fault | None
    ) -> web.StreamResponse:
        path = request.path
        self.requests[path] += 1
        is_binance = path.startswith(("/fapi/", "/futures/data/"))
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
            response = json_response(too_many_body(client, self.limiter.limit_1m), status=429)
            response.headers["Retry-After"] = str(verdict.retry_after_secs)
        elif verdict.status == 418:
            response = json_response(banned_body(client, verdict.banned_until_ms), status=418)
            response.headers["Retry-After"] = str(verdict.retry_after_secs)
        else:
            try:
                response = await handler(request)
            except ApiError as exc:
                response = exc.response()
        response.headers["X-MBX-USED-WEIGHT-1M"] = str(verdict.used_weight)
        return response

    def _fault_response(self, fault: Fault, request: web.Request) -> web.Response:
        client = request.remote or "unknown"
        now_ms = self._clock.now_ms()
        used_weight = self.limiter.used_weight(client, now_ms)
        return fault_response(
            fault, client, now_ms, limit_1m=self.limiter.limit_1m, used_weight=used_weight
        )

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

    # -- endpoints ---------------------------------------------------------------------------

    async def _ping(self, request: web.Request) -> web.Response:
        return json_response({})

    async def _time(self, request: web.Request) -> web.Response:
        return json_response({"serverTime": self._clock.now_ms()})

    async def _not_recorded(self, request: web.Request) -> web.Response:
        self._ticker(request.query, required=False)
        raise not_available(_NOT_RECORDED[request.path])

    async def _exchange_info(self, request: web.Request) -> web.Response:
        return json_response(
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
            limit = int_param(query, "limit", KLINES_DEFAULT_LIMIT) or 0
            if limit < 1:
                raise ApiError(-1130, "Data sent for parameter 'limit' is not valid.")
        except ApiError as exc:
            return exc.response()
        return json_response(
            self._spot.answer(symbol, interval, min(limit, 1000), self._clock.now_ms())
        )

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
        limit = int_param(query, "limit", KLINES_DEFAULT_LIMIT)
        assert limit is not None
        if limit < 1:
            raise ApiError(-1130, "Data sent for parameter 'limit' is not valid.")
        limit = min(limit, KLINES_MAX_LIMIT)  # Binance clamps rather than refuses
        start_ms = int_param(query, "startTime")
        end_ms = int_param(query, "endTime")
        if start_ms is not None and end_ms is not None and start_ms > end_ms:
            raise ApiError(-1023, "Start time is greater than end time.")
        candles = klines(
            self._feed, ticker, interval, start_ms, end_ms, limit, self._clock.now_ms()
        )
        return json_response([kline_row(self._feed, c) for c in candles])

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
        return json_response(rows[0] if asked is not None else rows)

    async def _funding_rate(self, request: web.Request) -> web.Response:
        query = request.query
        _, tickers = self._tickers(query)
        limit = int_param(query, "limit", FUNDING_DEFAULT_LIMIT)
        assert limit is not None
        if limit < 1:
            raise ApiError(-1130, "Data sent for parameter 'limit' is not valid.")
        limit = min(limit, FUNDING_MAX_LIMIT)
        start_ms = int_param(query, "startTime")
        end_ms = int_param(query, "endTime")
        if start_ms is not None and end_ms is not None and start_ms > end_ms:
            raise ApiError(-1023, "Start time is greater than end time.")
        now_ms = self._clock.now_ms()
        last_ms = now_ms if end_ms is None else min(end_ms, now_ms)
        rows = sorted(
            self._funding.rows(tickers, start_ms, last_ms),
            key=lambda r: (r["fundingTime"], r["symbol"]),
        )
        return json_response(rows[:limit] if start_ms is not None else rows[-limit:])

    async def _ticker_24h(self, request: web.Request) -> web.Response:
        asked, tickers = self._tickers(request.query)
        now_ms = self._clock.now_ms()
        rows = []
        for ticker in tickers:
            row = rolling_24h(self._feed, ticker, now_ms)
            if row is None:
                if asked is not None:
                    raise not_available(f"the {ticker} 24h ticker at {now_ms}")
                continue
            rows.append(row)
        return json_response(rows[0] if asked is not None else rows)

    async def _ticker_price(self, request: web.Request) -> web.Response:
        asked, now_ms, priced = self._priced_tickers(request)
        rows = [
            {"symbol": to_binance_symbol(t), "price": self._price(t, price), "time": now_ms}
            for t, price in priced
        ]
        return json_response(rows[0] if asked is not None else rows)

    async def _fear_greed(self, request: web.Request) -> web.Response:
        book = self._fear_greed_book
        if isinstance(book, str):
            return json_response(fear_greed_missing(book))
        return json_response(book.answer(request.query, self._clock.now_ms() // 1000))


__all__ = ["RestServer"]
