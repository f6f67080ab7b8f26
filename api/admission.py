"""Admission control: a bounded number of API requests in flight on the daemon's event loop.

The API shares its event loop with the trading: a decision that awaits (the broker, the journal,
Claude) resumes only after every callback ready before it has run. Fifty greedy clients keep
fifty requests' worth of callbacks ready at any instant, so each await of a decision queues behind
all of them. Bounding the requests in flight bounds that queue: a decision waits behind at most
``max_in_flight`` requests' steps, however many clients there are. Excess requests wait their
turn first come, first served (a cheap future each, no work on the loop); one that waited
``admission_wait_ms`` is answered 503 with ``Retry-After``, so an overloaded API says so instead
of answering ever later. Many clients thus get slower answers, never slower trading.

While a decision is in flight (``trading_busy``), only one request runs: a decision is a chain of
awaits, each of which resumes after every ready callback, so every request admitted beside it
lengthens it. Requests wait (up to ``admission_wait_ms``, like any other) and the full limit
comes back as soon as the decision is done.

Exempt: ``/healthz`` (a liveness probe must not fail because a dashboard is busy: the container
would be restarted for it) and the live decision stream (a connection held open for hours would
hold a slot for hours; what it sends is bounded by its own queue).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections import deque
from collections.abc import Callable

import orjson
from starlette.types import ASGIApp, Receive, Scope, Send

from api.asgi import send_answer

EXEMPT_PATHS = frozenset({"/healthz", "/api/decisions/stream"})


class Admission:
    """The slots: at most ``max_in_flight`` taken, waiters served first come, first served."""

    def __init__(
        self,
        max_in_flight: int,
        wait_secs: float,
        trading_busy: Callable[[], bool] = lambda: False,
    ) -> None:
        """``trading_busy``: a decision is in flight; only one request runs meanwhile."""
        if max_in_flight < 1:
            raise ValueError("max_in_flight must be at least 1")
        self.max_in_flight = max_in_flight
        self._wait_secs = wait_secs
        self._trading_busy = trading_busy
        self._waiters: deque[asyncio.Future[None]] = deque()
        self.in_flight = 0
        self.refused = 0  # waited too long: answered 503

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    @property
    def limit(self) -> int:
        """Slots now: one while a decision is in flight, else ``max_in_flight``."""
        return 1 if self._trading_busy() else self.max_in_flight

    async def admit(self) -> bool:
        """Take a slot (True), or False after waiting ``wait_secs`` for one."""
        self._fill()  # slots a finished decision gave back
        if self.in_flight < self.limit and not self._waiters:
            self.in_flight += 1
            return True
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            # a slot handed over just as the wait times out is taken (wait_for returns then)
            await asyncio.wait_for(waiter, self._wait_secs)
            return True
        except TimeoutError:
            self.refused += 1
            return False
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release()  # the client left holding a slot: it goes on to the next
            raise
        finally:
            with contextlib.suppress(ValueError):  # already handed a slot and popped
                self._waiters.remove(waiter)

    def release(self) -> None:
        self.in_flight -= 1
        self._fill()

    def _fill(self) -> None:
        """Hand free slots to the longest waiters still waiting, up to the limit now."""
        while self._waiters and self.in_flight < self.limit:
            waiter = self._waiters.popleft()
            if not waiter.done():
                self.in_flight += 1
                waiter.set_result(None)


class AdmissionControl:
    """Pure ASGI middleware: ``app.add_middleware(AdmissionControl, admission=..., ...)``."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        admission: Admission,
        retry_after_secs: int,
        exempt: frozenset[str] = EXEMPT_PATHS,
    ) -> None:
        self.app = app
        self._admission = admission
        self._retry_after_secs = retry_after_secs
        self._exempt = exempt

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in self._exempt:
            await self.app(scope, receive, send)
            return
        if not await self._admission.admit():
            await self._busy(send)
            return
        try:
            await self.app(scope, receive, send)
        finally:
            self._admission.release()

    async def _busy(self, send: Send) -> None:
        body = orjson.dumps(
            {
                "detail": (
                    f"the API is busy ({self._admission.max_in_flight} requests in flight, more "
                    "waiting): "
                    f"retry after {self._retry_after_secs} s"
                )
            }
        )
        headers = [
            (b"content-type", b"application/json"),
            (b"retry-after", str(math.ceil(self._retry_after_secs)).encode()),
        ]
        await send_answer(send, 503, body, headers)


__all__ = ["EXEMPT_PATHS", "Admission", "AdmissionControl"]
