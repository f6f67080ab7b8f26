"""Binance-shaped REST errors, request weights and query parameters of the simulator's REST side.

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

import re
from collections.abc import Callable, Mapping
from typing import Any, Final

import orjson
from aiohttp import web

from sim.rest_faults import Fault

KLINES_DEFAULT_LIMIT: Final = 500
KLINES_MAX_LIMIT: Final = 1500
NOT_AVAILABLE_CODE: Final = -1020

#: weight of a klines request by its (clamped) limit, as Binance publishes it
_KLINES_WEIGHT_BY_LIMIT: Final = ((99, 1), (499, 2), (1000, 5))
#: endpoint -> (weight with a symbol, weight without one)
_WEIGHTS: Final[dict[str, tuple[int, int]]] = {
    "/fapi/v1/ticker/24hr": (1, 40),
    "/fapi/v1/ticker/price": (1, 2),
    "/fapi/v1/premiumIndex": (1, 10),
}

_INT_RE: Final = re.compile(r"^-?[0-9]{1,20}$")


class ApiError(Exception):
    """A Binance-shaped error answer: HTTP ``status`` with ``{"code": code, "msg": msg}``."""

    def __init__(self, code: int, msg: str, status: int = 400) -> None:
        super().__init__(msg)
        self.code, self.msg, self.status = code, msg, status

    def response(self) -> web.Response:
        return json_response({"code": self.code, "msg": self.msg}, status=self.status)


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


def json_response(payload: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(payload), status=status, content_type="application/json")


def int_param(query: Mapping[str, str], name: str, default: int | None = None) -> int | None:
    raw = query.get(name)
    if raw is None or raw == "":
        return default
    if not _INT_RE.match(raw):
        raise ApiError(
            -1100,
            f"Illegal characters found in parameter '{name}'; legal range is '^[0-9]{{1,20}}$'.",
        )
    return int(raw)


def too_many_body(client: str, limit_1m: int) -> dict[str, Any]:
    return {
        "code": -1003,
        "msg": f"Too many requests; current limit of IP({client}) is "
        f"{limit_1m} requests per minute. Please use the websocket for live "
        "updates to avoid polling the API.",
    }


def banned_body(client: str, until_ms: int) -> dict[str, Any]:
    return {
        "code": -1003,
        "msg": f"Way too many requests; IP({client}) banned until {until_ms}. Please use the "
        "websocket for live updates to avoid bans.",
    }


def fault_response(
    fault: Fault, client: str, now_ms: int, *, limit_1m: int, used_weight: int
) -> web.Response:
    """The answer an injected fault stands for (``sim.rest_faults``), as Binance would give it."""
    if fault.status == 429:
        response = json_response(too_many_body(client, limit_1m), status=429)
    elif fault.status == 418:
        until_ms = now_ms + fault.retry_after_secs * 1000
        response = json_response(banned_body(client, until_ms), status=418)
    elif fault.status == 500:
        body = {"code": -1001, "msg": "Internal error; unable to process your request."}
        response = json_response(body, status=500)
    elif fault.status == 503:
        body = {"code": -1008, "msg": "Server is currently overloaded with other requests."}
        response = json_response(body, status=503)
    else:  # 502 comes from the load balancer, not the API: an HTML page
        response = web.Response(
            text="<html><body><h1>502 Bad Gateway</h1></body></html>",
            status=502,
            content_type="text/html",
        )
    if fault.status in (418, 429):
        response.headers["Retry-After"] = str(fault.retry_after_secs)
    response.headers["X-MBX-USED-WEIGHT-1M"] = str(used_weight)
    return response


def rewritten(response: web.StreamResponse, rewrite: Callable[[Any], Any]) -> web.Response:
    """``response`` with its JSON body replaced by ``rewrite(body)`` (bytes: sent as they are),
    status 200, its request-weight header kept: the answer of a garbled or hostile exchange."""
    body = response.body if isinstance(response, web.Response) else None
    original = orjson.loads(body) if isinstance(body, bytes) and body else None
    replaced = rewrite(original)
    payload = replaced if isinstance(replaced, bytes) else orjson.dumps(replaced)
    answer = web.Response(body=payload, status=200, content_type="application/json")
    weight = response.headers.get("X-MBX-USED-WEIGHT-1M")
    if weight is not None:
        answer.headers["X-MBX-USED-WEIGHT-1M"] = weight
    return answer


__all__ = [
    "KLINES_DEFAULT_LIMIT",
    "KLINES_MAX_LIMIT",
    "NOT_AVAILABLE_CODE",
    "ApiError",
    "banned_body",
    "fault_response",
    "int_param",
    "json_response",
    "not_available",
    "request_weight",
    "rewritten",
    "too_many_body",
]
