"""Fake context providers on loopback: Binance futures data, alternative.me, DeFiLlama, CoinGecko,
Binance spot klines (PAXGUSDT) and Farside's BTC ETF flow page.

One aiohttp server answers every provider's path in that provider's documented response shape, so
one base URL serves as Binance's ``fapi`` (through ccxt's re-pointed URLs) and as each web API's
base. The bodies are in ``fakes.context_bodies``, the Farside page in ``fakes.etf_page``. Each path
can be switched to fail: ``"429"``/``"418"`` (with ``Retry-After``), ``"500"``, ``"html"`` (a 200
that is not JSON), ``"wrong_shape"`` (valid JSON, wrong fields), ``"hang"`` (never answers until the
server stops), ``"not_available"`` (the simulator's 404 -1020). ``answers[path]`` replaces a path's
200 answer with a body of the test's (a hostile one): bytes or text as they are, anything else as JSON;
a ``(status, text)`` pair answers that status with that text.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any, Final

import orjson
from aiohttp import web

from fakes.context_bodies import (
    basis,
    fear_greed,
    open_interest_hist,
    paxg_klines,
    premium_index,
    stablecoins,
    taker_ratio,
    top_long_short,
    trending,
)
from fakes.etf_page import farside_page

PREMIUM_INDEX: Final = "/fapi/v1/premiumIndex"
OPEN_INTEREST_HIST: Final = "/futures/data/openInterestHist"
TAKER_RATIO: Final = "/futures/data/takerlongshortRatio"
TOP_LONG_SHORT: Final = "/futures/data/topLongShortAccountRatio"
BASIS: Final = "/futures/data/basis"
FNG: Final = "/fng/"
STABLECOINS: Final = "/stablecoins"
TRENDING: Final = "/api/v3/search/trending"
SPOT_KLINES: Final = "/api/v3/klines"
FARSIDE: Final = "/bitcoin-etf-flow-all-data/"


class ContextServers:
    """The fake providers on 127.0.0.1; ``mode[path]`` switches a path's answer."""

    def __init__(self) -> None:
        self.mode: dict[str, str] = {}
        self.requests: Counter[str] = Counter()
        self.long_short_rows: list[float] | None = None  # ratios, oldest first; None: the doc rows
        self.retry_after_secs = 7
        #: the Retry-After header sent with a 429 or 418 when set (a garbled one); else the secs
        self.retry_after_header: str | None = None
        #: the close every PAXG kline is answered with when set (a hostile one: "NaN", "0")
        self.paxg_close: str | None = None
        self.answers: dict[str, Any] = {}
        self._release = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def __aenter__(self) -> ContextServers:
        app = web.Application()
        for path in (
            PREMIUM_INDEX,
            OPEN_INTEREST_HIST,
            TAKER_RATIO,
            TOP_LONG_SHORT,
            BASIS,
            FNG,
            STABLECOINS,
            TRENDING,
            SPOT_KLINES,
            FARSIDE,
        ):
            app.router.add_get(path, self._handle)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.05)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._release.set()
        if self._runner is not None:
            await self._runner.cleanup()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        self.requests[path] += 1
        mode = self.mode.get(path, "ok")
        if mode == "hang":
            await self._release.wait()
        if mode in ("429", "418"):
            body = {
                "code": -1003,
                "msg": "Too many requests; current limit is 2400 requests per minute.",
            }
            retry_after = self.retry_after_header or str(self.retry_after_secs)
            return _json(body, int(mode), {"Retry-After": retry_after})
        if mode == "500":
            return _json(
                {"code": -1001, "msg": "Internal error; unable to process your request."}, 500
            )
        if mode == "html":
            return web.Response(
                text="<html><body>maintenance</body></html>", content_type="text/html"
            )
        if mode == "not_available":
            msg = "open interest is not available in the recorded data"
            return _json({"code": -1020, "msg": msg}, 404)
        if mode == "wrong_shape":
            return _json(
                {"unexpected": True}
                if path in (FNG, STABLECOINS, TRENDING, PREMIUM_INDEX, FARSIDE)
                else [{"symbol": "BTCUSDT"}],
                200,
            )
        if path in self.answers:
            return _answer(self.answers[path])
        if path == FARSIDE:
            return web.Response(text=farside_page(), content_type="text/html")
        return _json(self._ok(path, request.query), 200)

    def _ok(self, path: str, query: Any) -> Any:
        symbol = query.get("symbol") or query.get("pair") or "BTCUSDT"
        if path == PREMIUM_INDEX:
            if query.get("symbol"):
                return premium_index(symbol)
            return [premium_index(s) for s in ("BTCUSDT", "ETHUSDT", "XRPUSDT")]
        if path == OPEN_INTEREST_HIST:
            return open_interest_hist(symbol)
        if path == TAKER_RATIO:
            return taker_ratio()
        if path == TOP_LONG_SHORT:
            if self.long_short_rows is None:
                return top_long_short(symbol)
            return [
                {
                    "symbol": symbol,
                    "longShortRatio": f"{r:.4f}",
                    "longAccount": "0.5",
                    "shortAccount": "0.5",
                    "timestamp": str(1583139600000 + i * 3_600_000),
                }
                for i, r in enumerate(self.long_short_rows)
            ]
        if path == BASIS:
            return basis(symbol)
        if path == FNG:
            return fear_greed()
        if path == STABLECOINS:
            return stablecoins()
        if path == SPOT_KLINES:
            rows = paxg_klines(query.get("interval", "1h"))
            if self.paxg_close is not None:
                rows = [[*row[:4], self.paxg_close, *row[5:]] for row in rows]
            return rows
        return trending()


def _answer(body: Any) -> web.Response:
    if isinstance(body, tuple):
        status, text = body
        return web.Response(text=text, status=status, content_type="text/html")
    if isinstance(body, str):
        return web.Response(text=body, content_type="text/html")
    if isinstance(body, bytes):
        return web.Response(body=body, content_type="application/json")
    return _json(body, 200)


def _json(body: Any, status: int, headers: dict[str, str] | None = None) -> web.Response:
    response = web.Response(body=orjson.dumps(body), status=status, content_type="application/json")
    response.headers.update(headers or {})
    response.headers["X-MBX-USED-WEIGHT-1M"] = "1"
    return response


__all__ = ["ContextServers"]
