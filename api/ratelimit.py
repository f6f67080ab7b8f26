"""A ceiling on the requests the API answers a second (``[api] max_requests_per_sec``, 0: none).

Why a trading host wants one: the API's own process (``isolation = "process"``) keeps requests off
the daemon's loop, but not off the machine. Measured on 2 cores, 50 greedy clients kept both cores
busy (the clients and the API process) and a decision's median latency rose 25 % although no
request reached the daemon at all. Answering at most N requests a second bounds what the API and
its clients take of the cores; a request over the ceiling gets ``429`` with ``Retry-After`` at
once (cheap), and a polite client waits, so its next request costs nothing meanwhile.

A token bucket of ``rate`` tokens a second holding at most ``rate`` (one second of burst; at
least one), on the process's monotonic clock: this is the operator's surface, timed in real
seconds whatever the daemon's clock says. ``/healthz`` and the live decision stream are exempt, as in admission control.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import orjson
from starlette.types import ASGIApp, Receive, Scope, Send

from api.admission import EXEMPT_PATHS
from api.asgi import send_answer


class TokenBucket:
    def __init__(
        self, rate_per_sec: float, monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        if rate_per_sec <= 0:
            raise ValueError("a rate limit needs a positive rate")
        self.rate = rate_per_sec
        self.capacity = max(1.0, rate_per_sec)  # under 1 a second: still one request at a time
        self._monotonic = monotonic
        self._tokens = self.capacity
        self._at = monotonic()
        self.refused = 0

    def take(self) -> bool:
        now = self._monotonic()
        self._tokens = min(self.capacity, self._tokens + (now - self._at) * self.rate)
        self._at = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        self.refused += 1
        return False


class RateLimit:
    """Pure ASGI middleware: ``app.add_middleware(RateLimit, bucket=TokenBucket(...))``.

    With ``authorised`` (whether a request carries the API's token), requests without it draw on
    a bucket of their own, ``anonymous``: any local process could otherwise spend the one bucket
    with requests that are only ever answered 401, and the operator's halt got 429."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        bucket: TokenBucket,
        exempt: frozenset[str] = EXEMPT_PATHS,
        authorised: Callable[[Scope], bool] | None = None,
        anonymous: TokenBucket | None = None,
    ) -> None:
        self.app = app
        self._bucket = bucket
        self._exempt = exempt
        self._authorised = authorised
        self._anonymous = anonymous or bucket
        self._body = orjson.dumps(
            {"detail": f"over the API's {bucket.rate:g} requests a second: retry later"}
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in self._exempt:
            await self.app(scope, receive, send)
            return
        owner = self._authorised is None or self._authorised(scope)
        if (self._bucket if owner else self._anonymous).take():
            await self.app(scope, receive, send)
            return
        headers = [
            (b"content-type", b"application/json"),
            (b"retry-after", str(max(1, math.ceil(1 / self._bucket.rate))).encode()),
        ]
        await send_answer(send, 429, self._body, headers)


__all__ = ["RateLimit", "TokenBucket"]
