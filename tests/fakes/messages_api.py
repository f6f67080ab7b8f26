"""A fake Anthropic Messages API on loopback, for driving the real ``anthropic`` SDK in tests.

Each test scripts a queue of responses (status, headers, JSON body or raw bytes, delay) and reads
back every request the SDK sent (headers incl. ``x-api-key``, the JSON body). Response and error
bodies follow the real API's shapes. With the queue empty the server answers 500 ``api_error`` so a
test that under-scripts fails loudly instead of hanging, unless an ``answerer`` is set: then it
answers from the request itself (``fakes.snapshot_answerer``).

``realistic_usage=True`` replaces the usage of every 200 answer by the one the real API would
report for that request and answer (``fakes.usage_model``: tokens counted from the request as
sent, prompt-cache reads and writes with their TTLs on ``now_ms``), and echoes the request's model.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Self

import orjson
from aiohttp import web

from fakes.usage_model import PromptCache

StopReason = Literal["end_turn", "max_tokens", "refusal", "stop_sequence"]
ErrorType = Literal[
    "overloaded_error",
    "rate_limit_error",
    "api_error",
    "invalid_request_error",
    "authentication_error",
    "not_found_error",
]

_ids = itertools.count(1)
TRICKLE_CHUNK_BYTES = 64
_JSON = {"content-type": "application/json", "request-id": "req_fake"}


@dataclass(frozen=True)
class ScriptedResponse:
    status: int = 200
    body: dict[str, Any] | bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay_secs: float = 0.0  # real seconds before answering (to trip client timeouts)
    #: real seconds between the body's chunks of ``TRICKLE_CHUNK_BYTES``: every read gets bytes
    #: in time, the whole answer does not
    trickle_secs: float = 0.0


@dataclass(frozen=True)
class RecordedRequest:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


def usage_body(
    input_tokens: int = 1200,
    output_tokens: int = 300,
    cache_creation_input_tokens: int = 0,
    cache_read_input_tokens: int = 0,
) -> dict[str, Any]:
    return {
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "cache_creation_input_tokens": cache_creation_input_tokens,
        "cache_read_input_tokens": cache_read_input_tokens,
        "service_tier": "standard",
    }


def text_message(
    text: str,
    *,
    stop_reason: StopReason = "end_turn",
    model: str = "claude-sonnet-4-5",
    usage: dict[str, Any] | None = None,
) -> ScriptedResponse:
    """A 200 answer with one text block, as the real API returns it."""
    return ScriptedResponse(
        body={
            "id": f"msg_fake{next(_ids):08d}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [{"type": "text", "text": text}],
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": usage if usage is not None else usage_body(),
        }
    )


def json_message(answer: object, **kwargs: Any) -> ScriptedResponse:
    return text_message(orjson.dumps(answer).decode(), **kwargs)


def error_response(
    status: int,
    error_type: ErrorType,
    message: str = "scripted error",
    headers: dict[str, str] | None = None,
    delay_secs: float = 0.0,
) -> ScriptedResponse:
    return ScriptedResponse(
        status=status,
        body={
            "type": "error",
            "error": {"type": error_type, "message": message},
            "request_id": f"req_fake{next(_ids):08d}",
        },
        headers=headers or {},
        delay_secs=delay_secs,
    )


def overloaded() -> ScriptedResponse:
    return error_response(529, "overloaded_error", "Overloaded")


def rate_limited(retry_after_secs: float) -> ScriptedResponse:
    return error_response(
        429,
        "rate_limit_error",
        "Number of request tokens has exceeded your per-minute rate limit",
        headers={"retry-after": f"{retry_after_secs:g}"},
    )


class FakeMessagesApi:
    """``async with FakeMessagesApi() as api``: ``api.base_url`` for the SDK, ``api.script(...)``."""

    def __init__(
        self,
        usage_for: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
        *,
        answerer: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
        realistic_usage: bool = False,
    ) -> None:
        #: when set, a scripted 200 message's usage is what this says the request costs
        self._usage_for = usage_for
        self._queue: deque[ScriptedResponse] = deque()
        self.answerer = answerer
        self.realistic_usage = realistic_usage
        #: the clock prompt-cache TTLs run on (the cost bench sets the replay's virtual clock)
        self.now_ms: Callable[[], int] = lambda: int(time.time() * 1000)
        self.cache = PromptCache(lambda: self.now_ms())  # noqa: PLW0108 - read at each call
        self.requests: list[RecordedRequest] = []
        self._runner: web.AppRunner | None = None
        self._port = 0
        self._closing = asyncio.Event()
        #: when set, only these keys are accepted (others: 401, the script untouched)
        self.accepted_keys: set[str] | None = None
        #: answers a request's JSON body once the script is used up (e.g. role-aware debate
        #: answers); None: the 500 that makes an under-scripted test fail loudly
        self.responder: Callable[[dict[str, Any]], ScriptedResponse] | None = None

    @property
    def base_url(self) -> str:
        if self._runner is None:
            raise RuntimeError("FakeMessagesApi is not started")
        return f"http://127.0.0.1:{self._port}"

    def script(self, *responses: ScriptedResponse) -> None:
        self._queue.extend(responses)

    @property
    def pending(self) -> int:
        return len(self._queue)

    async def start(self) -> None:
        app = web.Application(client_max_size=8 * 1024 * 1024)
        app.router.add_post("/v1/messages", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self._port = int(self._runner.addresses[0][1])

    async def stop(self) -> None:
        self._closing.set()  # wakes delayed answers so shutdown does not wait them out
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        recorded = RecordedRequest(
            path=request.path,
            headers={k.lower(): v for k, v in request.headers.items()},
            body=orjson.loads(raw) if raw else {},
        )
        self.requests.append(recorded)
        # the key as sent: x-api-key, or a bearer token (this SDK version's way)
        sent = request.headers.get("x-api-key") or request.headers.get("authorization") or ""
        key = sent.removeprefix("Bearer ")
        if self.accepted_keys is not None and key not in self.accepted_keys:
            rejected = error_response(401, "authentication_error", "invalid x-api-key")
            assert isinstance(rejected.body, dict)
            return web.Response(status=401, body=_encode(rejected.body), headers=_JSON)
        scripted = self._next(recorded.body)
        if scripted.delay_secs > 0:
            # A real-time delay is the point here: the client under test has a real socket timeout.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closing.wait(), scripted.delay_secs)
        body = scripted.body
        if self._usage_for is not None and isinstance(body, dict) and body.get("type") == "message":
            body = {**body, "usage": self._usage_for(self.requests[-1].body)}
        elif self.realistic_usage and isinstance(body, dict) and body.get("type") == "message":
            body = self._with_realistic_usage(recorded.body, body)
        payload = body if isinstance(body, bytes) else _encode(body)
        headers = {"content-type": "application/json", "request-id": "req_fake", **scripted.headers}
        if scripted.trickle_secs > 0:
            return await self._trickle(request, scripted, payload, headers)
        return web.Response(status=scripted.status, body=payload, headers=headers)

    async def _trickle(
        self,
        request: web.Request,
        scripted: ScriptedResponse,
        payload: bytes,
        headers: dict[str, str],
    ) -> web.StreamResponse:
        response = web.StreamResponse(status=scripted.status, headers=headers)
        response.content_length = len(payload)
        await response.prepare(request)
        for start in range(0, len(payload), TRICKLE_CHUNK_BYTES):
            try:
                await response.write(payload[start : start + TRICKLE_CHUNK_BYTES])
            except ConnectionError:  # the client gave up: what the trickle is there to cause
                return response
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closing.wait(), scripted.trickle_secs)
            if self._closing.is_set():
                return response
        await response.write_eof()
        return response

    def _next(self, request: dict[str, Any]) -> ScriptedResponse:
        if self._queue:
            return self._queue.popleft()
        if self.responder is not None:
            return self.responder(request)
        if self.answerer is not None:
            return json_message(self.answerer(request))
        return error_response(500, "api_error", "FakeMessagesApi: no scripted response left")

    def _with_realistic_usage(
        self, request: dict[str, Any], body: dict[str, Any]
    ) -> dict[str, Any]:
        text = "".join(
            str(block.get("text", ""))
            for block in body.get("content") or []
            if isinstance(block, dict)
        )
        usage = self.cache.usage(request, text)
        return {**body, "model": request.get("model", body.get("model")), "usage": usage}


def _encode(body: dict[str, Any]) -> bytes:
    """orjson, or the stdlib for what orjson refuses (integers past 64 bits, NaN as a literal):
    hostile answers must reach the SDK exactly as scripted."""
    try:
        return orjson.dumps(body)
    except TypeError:
        return json.dumps(body).encode()
