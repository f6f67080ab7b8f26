"""The API process (``runner.api_process``) in front of a daemon's private API, both real servers
on loopback: live figures coalesced, commands forwarded, the token checked before anything goes
upstream, a silent daemon answered with 503, and the decision stream relayed live."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import aiohttp
from fakes.api_client import sse_events
from fakes.api_support import T0_MS, TOKEN, IdleDaemon, decision_line, serve_api
from yarl import URL

from api.bodylimit import MAX_BODY_BYTES
from api.config import ApiConfig
from api.models import TradingBody
from api.proxy import Upstream
from api.runs import RunLimits, RunQueue
from api.runs_models import RunRequest
from api.runs_routes import run_routes
from api.server import bind
from api.stream import DecisionStream, stream_routes
from runner.api_process import ApiProcessSpec, build_process_server


class Switch:
    """``api.ports.TradingControl``: a halt is remembered."""

    def __init__(self) -> None:
        self.state, self.reason = "active", ""

    def trading(self) -> TradingBody:
        return TradingBody(state=self.state, reason=self.reason, changed_at_ms=T0_MS)

    def halt(self, reason: str) -> TradingBody:
        self.state, self.reason = "halted", reason
        return self.trading()

    def resume(self) -> TradingBody:
        self.state, self.reason = "active", ""
        return self.trading()


@dataclass
class Front:
    url: str
    upstream: Upstream
    http: aiohttp.ClientSession


@contextlib.asynccontextmanager
async def front(state_dir: Path, upstream_url: str, live_cache_ms: int) -> AsyncIterator[Front]:
    """The API process's server (in this process: the same app ``main`` builds)."""
    spec = ApiProcessSpec(
        state_dir=state_dir,
        logs_dir=state_dir / "logs",
        api=ApiConfig(port=0, live_cache_ms=live_cache_ms),
        token=TOKEN,
        upstream_url=upstream_url,
    )
    server, upstream = build_process_server(spec)
    task = asyncio.create_task(server.run())
    try:
        await asyncio.wait_for(server.started.wait(), 10)
        assert server.url is not None
        async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {TOKEN}"}) as http:
            yield Front(server.url, upstream, http)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await upstream.close()


async def test_fifty_status_requests_ask_the_daemon_once_until_a_decision(state_dir: Path) -> None:
    async with (
        serve_api(state_dir, daemon=IdleDaemon(), trading=Switch()) as daemon,
        front(state_dir, daemon.url, live_cache_ms=60_000) as api,
    ):

        async def status() -> dict[str, object]:
            async with api.http.get(api.url + "/api/status") as r:
                assert r.status == 200, await r.text()
                body: dict[str, object] = await r.json()
                return body

        answers = await asyncio.gather(*(status() for _ in range(50)))
        assert {a["source"] for a in answers} == {"daemon"}  # the live figures, not the files
        assert api.upstream.requests == 1
        with (state_dir / "logs" / "decisions.jsonl").open("ab") as journal:
            journal.write(decision_line(99, T0_MS + 99_000))
        newest = await status()
        assert api.upstream.requests == 2  # a new decision is seen at once, as on the daemon
        assert newest["last_decision"]["decision_id"].endswith("-99")  # type: ignore[index]


async def test_the_token_is_checked_before_anything_goes_upstream(state_dir: Path) -> None:
    async with (
        serve_api(state_dir, daemon=IdleDaemon(), trading=Switch()) as daemon,
        front(state_dir, daemon.url, live_cache_ms=60_000) as api,
        aiohttp.ClientSession() as anonymous,
    ):
        async with api.http.get(api.url + "/api/status") as r:
            assert r.status == 200  # now an answer is cached ...
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic x"}):
            for path in ("/api/status", "/metrics", "/api/decisions/stream", "/api/decisions"):
                async with anonymous.get(api.url + path, headers=headers) as r:
                    assert r.status == 401, (path, headers)  # ... and never handed out
                    assert r.headers["WWW-Authenticate"] == "Bearer"
                    assert "token" in (await r.json())["detail"]
        assert api.upstream.requests == 1


async def test_commands_and_refusals_pass_through(state_dir: Path) -> None:
    switch = Switch()
    async with (
        serve_api(state_dir, daemon=IdleDaemon(), trading=switch) as daemon,
        front(state_dir, daemon.url, live_cache_ms=0) as api,
    ):
        async with api.http.post(api.url + "/api/trading/halt", json={"reason": "by proxy"}) as r:
            assert r.status == 200 and (await r.json())["state"] == "halted"
        assert (switch.state, switch.reason) == ("halted", "by proxy")
        async with api.http.put(api.url + "/api/memory/notes", json={"notes": 3}) as r:
            assert r.status == 422  # the daemon's validation, word for word
            assert "notes" in await r.text()
        async with api.http.get(api.url + "/api/runs/no-such-run") as r:
            assert r.status in (404, 503) and "detail" in await r.json()
        async with api.http.get(api.url + "/openapi.json") as r:
            paths = (await r.json())["paths"]
            assert "/api/trading/halt" in paths  # the daemon's schema, as the daemon serves it


async def test_a_content_type_that_is_not_utf8_is_forwarded_not_a_500(state_dir: Path) -> None:
    switch = Switch()
    async with (
        serve_api(state_dir, daemon=IdleDaemon(), trading=switch) as daemon,
        front(state_dir, daemon.url, live_cache_ms=0) as api,
    ):
        status, body = await raw_request(
            api.url,
            b"POST /api/trading/halt HTTP/1.1\r\nHost: x\r\n"
            b"Authorization: Bearer " + TOKEN.encode() + b"\r\n"
            b"Content-Type: application/json; x=\xff\r\n"  # a byte UTF-8 cannot decode
            b'Content-Length: 17\r\nConnection: close\r\n\r\n{"reason": "raw"}',
        )
    assert status == 200, body
    assert (switch.state, switch.reason) == ("halted", "raw")


async def test_a_forwarded_path_reaches_only_the_route_it_names(state_dir: Path) -> None:
    """The decoded path, forwarded, was read again by the daemon: ``..%2F`` and ``%2e%2e``
    reached its other routes past the live cache, ``%3F`` cut a run id short."""
    paths = [
        "/api/runs/..%2F..%2Fapi%2Fstatus",
        "/api/runs/%2e%2e/status",
        "/api/runs/..%2Fdecisions%3Flimit%3D1",
        "/api/runs/a%3Fb",
        "/api/runs/a%20b",
    ]
    async with (
        serve_api(state_dir, daemon=IdleDaemon(), trading=Switch()) as daemon,
        front(state_dir, daemon.url, live_cache_ms=60_000) as api,
    ):
        for path in paths:
            answers = []
            for base in (daemon.url, api.url):  # the daemon's own API, then the API process
                async with api.http.get(URL(base + path, encoded=True)) as r:
                    answers.append((r.status, await r.json()))
            assert answers[0] == answers[1], path
            assert answers[1][0] in (404, 422), (path, answers[1])
        assert api.upstream.requests == len(paths)  # each forwarded once


async def test_a_method_the_daemon_refuses_keeps_its_allow_header(state_dir: Path) -> None:
    async with (
        serve_api(state_dir, daemon=IdleDaemon(), trading=Switch()) as daemon,
        front(state_dir, daemon.url, live_cache_ms=0) as api,
    ):
        for path in ("/api/status", "/api/trading/halt", "/api/memory/notes"):
            allowed = []
            for base in (daemon.url, api.url):
                async with api.http.request("TRACE", base + path) as r:
                    assert r.status == 405, path
                    allowed.append(r.headers.get("Allow"))
            assert allowed[0] and allowed[1] == allowed[0], (path, allowed)  # RFC 9110


async def test_a_body_over_the_ceiling_never_reaches_the_daemon(state_dir: Path) -> None:
    body = b'{"notes": "' + b"x" * MAX_BODY_BYTES + b'"}'
    async with (
        serve_api(state_dir, daemon=IdleDaemon(), trading=Switch()) as daemon,
        front(state_dir, daemon.url, live_cache_ms=0) as api,
    ):
        headers = {"Content-Type": "application/json"}
        async with api.http.put(api.url + "/api/memory/notes", data=body, headers=headers) as r:
            assert r.status == 413
            assert "over 1,048,576 bytes" in (await r.json())["detail"]
        assert api.upstream.requests == 0


async def test_a_daemon_that_does_not_answer_is_a_503_with_retry_after(state_dir: Path) -> None:
    closed = bind("127.0.0.1", 0)
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there now
    async with front(state_dir, f"http://127.0.0.1:{port}", live_cache_ms=0) as api:
        for path in ("/api/status", "/metrics", "/api/decisions/stream"):
            async with api.http.get(api.url + path) as r:
                assert r.status == 503, path
                assert r.headers["Retry-After"] == "1"
                assert "not answering" in (await r.json())["detail"]
        async with api.http.get(api.url + "/api/decisions", params={"limit": "2"}) as r:
            assert r.status == 200  # what the files hold needs no daemon
            assert len((await r.json())["decisions"]) == 2


async def test_the_decision_stream_is_relayed_live(state_dir: Path) -> None:
    stream = DecisionStream()
    async with (
        serve_api(state_dir, daemon=IdleDaemon(), extensions=[stream_routes(stream)]) as daemon,
        front(state_dir, daemon.url, live_cache_ms=0) as api,
        api.http.get(api.url + "/api/decisions/stream") as r,
    ):
        assert r.status == 200 and r.headers["content-type"].startswith("text/event-stream")
        events = sse_events(r)
        assert await anext(events) == ("comment", "subscribed")
        stream.publish({"type": "decision", "decision_id": "live-1"})
        kind, data = await asyncio.wait_for(anext(events), 30)
        assert kind == "decision" and '"decision_id":"live-1"' in data


async def raw_request(url: str, request: bytes) -> tuple[int, bytes]:
    """``request`` sent byte for byte (aiohttp would encode the header); the status and body."""
    host, port = url.removeprefix("http://").rstrip("/").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(request)
        answer = await reader.read()  # Connection: close
    finally:
        writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


class _NoLauncher:
    def argv(self, request: RunRequest, out_dir: Path) -> Sequence[str]:
        raise AssertionError("nothing is submitted here")


async def test_a_405_allows_every_method_its_path_serves(state_dir: Path) -> None:
    """``OPTIONS /api/runs`` said ``Allow: POST`` (Starlette's first route of the path), though
    ``GET`` is served too: every path of the schema, on the daemon's API and through the API
    process, with the daemon's extensions."""
    queue = RunQueue(state_dir, _NoLauncher(), RunLimits())
    extensions = [stream_routes(DecisionStream(8)), run_routes(queue)]
    async with (
        serve_api(
            state_dir, daemon=IdleDaemon(), trading=Switch(), extensions=extensions
        ) as daemon,
        front(state_dir, daemon.url, live_cache_ms=0) as api,
    ):
        async with api.http.get(daemon.url + "/openapi.json") as r:
            paths: dict[str, dict[str, object]] = (await r.json())["paths"]
        assert {"get", "post"} <= set(paths["/api/runs"])
        for template, operations in paths.items():
            served = {method.upper() for method in operations}  # FastAPI serves no HEAD of GET
            path = template.replace("{run_id}", "r1")
            for base in (daemon.url, api.url):
                for method in ("OPTIONS", "PATCH"):
                    async with api.http.request(method, base + path) as r:
                        assert r.status == 405, (base, method, path)
                        allowed = set(r.headers["Allow"].split(", "))
                        assert allowed == served, (base, method, path)


async def test_open_streams_leave_commands_a_way_to_the_daemon(state_dir: Path) -> None:
    """Each stream client holds a link to the daemon as long as it listens, and the streams took
    them from the forwards' pool (aiohttp's 100 links): with 100 dashboards open a halt waited
    30 s for a link and was answered 503 'the daemon is not answering', and the 101st stream
    waited for ever."""
    stream, switch, listening = DecisionStream(), Switch(), 100
    async with (
        serve_api(
            state_dir, daemon=IdleDaemon(), trading=switch, extensions=[stream_routes(stream)]
        ) as daemon,
        front(state_dir, daemon.url, live_cache_ms=0) as api,
        aiohttp.ClientSession(
            headers={"Authorization": f"Bearer {TOKEN}"}, connector=aiohttp.TCPConnector(limit=0)
        ) as dashboards,
        contextlib.AsyncExitStack() as held,
    ):
        for _ in range(listening):
            r = await held.enter_async_context(dashboards.get(api.url + "/api/decisions/stream"))
            assert r.status == 200
        async with api.http.post(api.url + "/api/trading/halt", json={"reason": "busy"}) as r:
            assert r.status == 200, await r.text()
        assert switch.state == "halted"
        async with api.http.get(api.url + "/api/status") as r:
            assert r.status == 200 and (await r.json())["source"] == "daemon"
        one_more = await held.enter_async_context(dashboards.get(api.url + "/api/decisions/stream"))
        assert await anext(sse_events(one_more)) == ("comment", "subscribed")


async def test_streams_past_the_most_served_are_503_with_retry_after(state_dir: Path) -> None:
    """Each stream holds a connection of the daemon for hours, and nothing bounded them short of
    the process's open files, which the daemon's journals need."""
    stream = DecisionStream(max_subscribers=3)
    async with (
        serve_api(state_dir, daemon=IdleDaemon(), extensions=[stream_routes(stream)]) as daemon,
        front(state_dir, daemon.url, live_cache_ms=0) as api,
        contextlib.AsyncExitStack() as held,
    ):
        for _ in range(3):
            r = await held.enter_async_context(api.http.get(api.url + "/api/decisions/stream"))
            assert await anext(sse_events(r)) == ("comment", "subscribed")
        async with api.http.get(api.url + "/api/decisions/stream") as r:
            code, retry, detail = r.status, r.headers.get("Retry-After"), (await r.json())["detail"]
        async with api.http.get(api.url + "/api/status") as r:
            assert r.status == 200
    assert (code, retry) == (503, "30")
    assert detail.startswith("3 decision streams are open")


async def _raw(url: str, request: bytes) -> bytes:
    """``request`` as sent, on a socket of its own (aiohttp upper-cases a method)."""
    host, port = URL(url).host, URL(url).port
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(request)
        await writer.drain()
        return await asyncio.wait_for(reader.read(65536), 30)
    finally:
        writer.close()


async def test_a_method_in_lower_case_is_refused_before_anything_goes_upstream(
    state_dir: Path,
) -> None:
    """Methods are case-sensitive, and aiohttp upper-cases the one it forwards: a ``get`` of the
    stream went to the daemon as a GET whose answer never ends, each held a link of the pool the
    commands use for 30 s, and with 200 of them open a halt was answered 503."""
    async with (
        serve_api(state_dir, daemon=IdleDaemon(), trading=Switch()) as daemon,
        front(state_dir, daemon.url, live_cache_ms=0) as api,
    ):
        for method, path in (("get", "/api/decisions/stream"), ("Post", "/api/trading/halt")):
            answer = await _raw(
                api.url,
                f"{method} {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
                "Connection: close\r\nContent-Length: 0\r\n\r\n".encode(),
            )
            assert answer.startswith(b"HTTP/1.1 501"), answer
            assert b"methods are upper case" in answer
        assert api.upstream.requests == 0


async def test_two_authorization_headers_are_judged_by_the_first_as_behind_the_proxy(
    state_dir: Path,
) -> None:
    """The API process read the last ``Authorization`` header and FastAPI the first."""
    async with (
        serve_api(state_dir, daemon=IdleDaemon(), trading=Switch()) as daemon,
        front(state_dir, daemon.url, live_cache_ms=0) as api,
    ):
        statuses = []
        for first, second in ((TOKEN, "wrong"), ("wrong", TOKEN)):
            for path in ("/api/status", "/api/decisions"):  # forwarded, and the API process's own
                answer = await _raw(
                    api.url,
                    f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {first}\r\n"
                    f"Authorization: Bearer {second}\r\nConnection: close\r\n\r\n".encode(),
                )
                statuses.append(answer.split(b" ", 2)[1])
    assert statuses == [b"200", b"200", b"401", b"401"]
