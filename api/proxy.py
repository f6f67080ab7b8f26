"""The API process's link to the daemon: live routes forwarded, the rest answered from files.

With ``[api] isolation = "process"`` the operator's API runs in a process of its own, so fifty
dashboards cost the daemon's event loop almost nothing: what the state dir's files hold (the
journal, trades, equity, the memory notes, the dashboard page) is answered here, and only what
needs the daemon's memory goes to its private loopback API:

- ``GET`` of a live figure (``/api/status``, ``/api/positions``, ``/metrics``) through a
  single-flight cache: at most one upstream request per route per ``live_cache_ms``, and a new
  journal line (a decision) makes the next request ask again, as the daemon's own cache does;
- commands and edits (halt, resume, the notes, replay jobs) and the OpenAPI schema, forwarded once;
- the live decision stream, relayed as it arrives.

A request is authorised here before anything is forwarded or served from the cache: a cached answer
never reaches a client without the token, and a flood without one never reaches the daemon. When
the daemon does not answer (its API loop restarting), the client gets 503 with ``Retry-After``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Hashable, Mapping

import aiohttp
import orjson
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.responses import StreamingResponse
from starlette.types import ASGIApp, Receive, Scope, Send
from yarl import URL

from api.asgi import first_header, send_answer
from api.auth import BearerAuth
from api.cache import ResponseCache

LIVE_GETS = frozenset({"/api/status", "/api/positions", "/metrics"})
STREAM_PATH = "/api/decisions/stream"
FORWARDED = frozenset(
    {"/api/trading/halt", "/api/trading/resume", "/api/memory/notes", "/openapi.json"}
)
FORWARDED_PREFIXES = ("/api/runs",)
PUBLIC = frozenset({"/openapi.json"})  # the schema is public on the daemon's API as well
RELAYED_HEADERS = ("content-type", "retry-after", "www-authenticate", "cache-control", "allow")
UPSTREAM_TIMEOUT_SECS = 30.0
UNREACHABLE_RETRY_SECS = 1


class UpstreamError(Exception):
    """The daemon answered something other than 200, or did not answer: sent on as it is."""

    def __init__(self, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
        super().__init__(status)
        self.status, self.body, self.headers = status, body, headers


def proxied(path: str) -> bool:
    return (
        path in LIVE_GETS
        or path == STREAM_PATH
        or path in FORWARDED
        or path.startswith(FORWARDED_PREFIXES)
    )


class Upstream:
    """The daemon's private API: two aiohttp sessions, opened on first use. A stream holds its
    link for as long as its client listens: sharing the forwards' pool (aiohttp's 100 links),
    100 open dashboards left a halt waiting 30 s for a link, then a 503, and the next stream
    waited for ever. Streams have a pool of their own, without a bound (each is a client's)."""

    def __init__(self, url: str, token: str) -> None:
        self.url = url.rstrip("/")
        self._auth = {"Authorization": f"Bearer {token}"}
        self._session: aiohttp.ClientSession | None = None
        self._streams: aiohttp.ClientSession | None = None
        self.requests = 0  # sent to the daemon (what the cache saves is the difference)

    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(headers=self._auth)
        return self._session

    def _stream_session(self) -> aiohttp.ClientSession:
        if self._streams is None or self._streams.closed:
            connector = aiohttp.TCPConnector(limit=0)
            self._streams = aiohttp.ClientSession(headers=self._auth, connector=connector)
        return self._streams

    async def close(self) -> None:
        for session in (self._session, self._streams):
            if session is not None:
                await session.close()

    async def fetch(self, method: str, target: str, body: bytes, content_type: str | None) -> bytes:
        """The 200 answer's body, or ``UpstreamError`` carrying what to send instead."""
        self.requests += 1
        headers = {"Content-Type": content_type} if content_type else {}
        timeout = aiohttp.ClientTimeout(total=UPSTREAM_TIMEOUT_SECS)
        try:
            async with self.session().request(
                method,
                URL(self.url + target, encoded=True),  # as sent: no dot segment resolved here
                data=body or None,
                headers=headers,
                timeout=timeout,
            ) as r:
                answer = await r.read()
                if r.status != 200:
                    raise UpstreamError(r.status, answer, _relayed(r.headers))
                return answer
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise unreachable(exc) from exc

    async def stream(self, target: str) -> aiohttp.ClientResponse:
        self.requests += 1
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=UPSTREAM_TIMEOUT_SECS)
        try:
            r = await self._stream_session().get(self.url + target, timeout=timeout)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise unreachable(exc) from exc
        if r.status != 200:
            answer = await r.read()
            r.release()
            raise UpstreamError(r.status, answer, _relayed(r.headers))
        return r


def unreachable(exc: BaseException) -> UpstreamError:
    detail = f"the daemon is not answering ({type(exc).__name__}): retry shortly"
    return UpstreamError(
        503,
        orjson.dumps({"detail": detail}),
        [
            (b"content-type", b"application/json"),
            (b"retry-after", str(UNREACHABLE_RETRY_SECS).encode()),
        ],
    )


def _relayed(headers: Mapping[str, str]) -> list[tuple[bytes, bytes]]:
    lowered = {k.lower(): v for k, v in headers.items()}
    return [(k.encode(), lowered[k].encode()) for k in RELAYED_HEADERS if k in lowered]


class LiveProxy:
    """Pure ASGI middleware, outermost in the API process's app (see the module's docstring)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        upstream: Upstream,
        auth: BearerAuth,
        live_cache_secs: float,
        journal_version: Callable[[], Hashable],
        cache: ResponseCache | None = None,
    ) -> None:
        self.app = app
        self._upstream = upstream
        self._auth = auth
        self._live_secs = live_cache_secs
        self._journal_version = journal_version
        self._cache = cache or ResponseCache()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or not proxied(path):
            await self.app(scope, receive, send)
            return
        refusal = None if path in PUBLIC else self._auth.scope_refusal(scope)
        if refusal is not None:
            await send_answer(send, 401, orjson.dumps({"detail": refusal}), _UNAUTHORISED)
            return
        method = scope["method"]
        if method != method.upper():
            # methods are case-sensitive (RFC 9110), and aiohttp sends the daemon an upper-cased
            # one: a 'get' of the stream was forwarded as a GET, its answer never ending, and 100
            # of them took every link the halts and resumes go through
            detail = f"{method!r} is not a method this API knows: methods are upper case (GET)"
            await send_answer(send, 501, orjson.dumps({"detail": detail}), _JSON)
            return
        try:
            if path == STREAM_PATH and scope["method"] == "GET":
                await self._relay_stream(scope, receive, send)
                return
            body = await self._answer(scope, receive)
        except UpstreamError as exc:
            await send_answer(send, exc.status, exc.body, exc.headers)
            return
        kind = CONTENT_TYPE_LATEST if path == "/metrics" else "application/json"
        await send_answer(send, 200, body, [(b"content-type", kind.encode())])

    async def _answer(self, scope: Scope, receive: Receive) -> bytes:
        method, path = scope["method"], scope["path"]
        target = _raw_target(scope)
        if method == "GET" and path in LIVE_GETS:
            # a new journal line is a new decision: asked again at once, as the daemon's cache does
            version = self._journal_version() if path == "/api/status" else None

            async def ask() -> bytes:
                return await self._upstream.fetch("GET", target, b"", None)

            return await self._cache.get(
                ("live", target), ask, version=version, max_age_secs=self._live_secs
            )
        # header bytes are latin-1 (as Starlette reads them): UTF-8 failed on b"\xff", a 500
        content_type = (first_header(scope, b"content-type") or b"").decode("latin-1") or None
        return await self._upstream.fetch(method, target, await _body(receive), content_type)

    async def _relay_stream(self, scope: Scope, receive: Receive, send: Send) -> None:
        upstream = await self._upstream.stream(scope["path"])

        async def chunks() -> AsyncIterator[bytes]:
            try:
                async for chunk in upstream.content.iter_any():
                    yield chunk
            finally:
                upstream.release()

        response = StreamingResponse(
            chunks(),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
        await response(scope, receive, send)  # ends the upstream read when the client leaves


_JSON = [(b"content-type", b"application/json")]
_UNAUTHORISED = [*_JSON, (b"www-authenticate", b"Bearer")]


def _raw_target(scope: Scope) -> str:
    """The path and query as the client sent them. The decoded path, forwarded, let the client
    choose another route of the daemon's: ``/api/runs/..%2Fdecisions`` was ``/api/decisions`` there,
    past the live cache, and ``/api/runs/a%3Fb`` asked for run ``a``."""
    raw: bytes = scope.get("raw_path") or scope["path"].encode()
    query: bytes = scope["query_string"]
    return (raw + b"?" + query if query else raw).decode("latin-1")


async def _body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


__all__ = ["LIVE_GETS", "LiveProxy", "Upstream", "UpstreamError", "proxied"]
