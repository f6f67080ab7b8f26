"""The notifier against webhook receivers on loopback that answer badly: an error page that is
not UTF-8, a redirect. Each costs its notification (counted, logged), never the notify loop,
and a notification the hook never got is never counted sent."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from pydantic import SecretStr

from api.notify.config import NotifyConfig, WebhookConfig
from api.notify.messages import Notification
from api.notify.notifier import Notifier
from core.backoff import Backoff
from core.clock import WallClock
from core.redact import Redactor

FAST_RETRY = Backoff(base_secs=0.01, cap_secs=0.05, max_attempts=2)
AT_MS = 1_740_787_200_000


@contextlib.asynccontextmanager
async def hostile_receiver(seen: list[tuple[str, str]]) -> AsyncIterator[str]:
    async def handle(request: web.Request) -> web.StreamResponse:
        seen.append((request.method, request.path))
        if request.path == "/latin1":
            return web.Response(status=500, body=b"\xff\xfe erreur \xe9", content_type="text/html")
        if request.path == "/found":
            raise web.HTTPFound("/elsewhere")  # a POST followed as a GET, without its body
        if request.path == "/permanent":
            raise web.HTTPPermanentRedirect("/elsewhere")
        if request.path.startswith("/echo/"):  # Express: 'Cannot POST' and the request, quoted
            quoted = f"Cannot POST {request.method} {request.path} HTTP/1.1\r\nHost: x\r\n"
            return web.Response(status=500, text=quoted + "2026-01-01 INFO trading resumed\n")
        if request.path == "/switch":  # a final 1xx: not a 2xx, whatever the body went to
            return web.Response(status=101, headers={"Upgrade": "x", "Connection": "upgrade"})
        return web.json_response({"ok": True})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


async def notify_twice(url: str, path: str, bad_url: str | None = None) -> Notifier:
    """Two notifications to ``path`` (or ``bad_url``) then one to a good hook; the loop must
    deliver the last."""
    bad = WebhookConfig(url=SecretStr(bad_url or url + path), events=("health",))
    good = WebhookConfig(url=SecretStr(url + "/good"), events=("fill",))
    notifier = Notifier(NotifyConfig(webhooks=(bad, good), retry=FAST_RETRY), WallClock())
    task = asyncio.create_task(notifier.run())
    try:
        for n in range(2):
            notifier.publish(Notification(event="health", at_ms=AT_MS + n, text=f"n{n}"))
        notifier.publish(Notification(event="fill", at_ms=AT_MS + 2, text="filled"))
        async with asyncio.timeout(10):  # a hang guard only
            while notifier.stats.sent + notifier.stats.failed < 3 and not task.done():
                await asyncio.sleep(0.01)
        assert not task.done(), task.exception()
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    return notifier


async def test_an_error_page_that_is_not_utf8_costs_its_notification_only() -> None:
    """response.text() raised UnicodeDecodeError, which no handler took: the notify loop
    ended with a traceback at each such answer."""
    seen: list[tuple[str, str]] = []
    async with hostile_receiver(seen) as url:
        notifier = await notify_twice(url, "/latin1")
    assert (notifier.stats.sent, notifier.stats.failed) == (1, 2)
    assert seen.count(("POST", "/latin1")) == 2 * FAST_RETRY.max_attempts  # a 500 is retried


@pytest.mark.parametrize("path", ["/found", "/permanent"])
async def test_a_redirect_is_not_followed_and_not_counted_sent(path: str) -> None:
    """aiohttp followed a 302 with a GET and no body, and its 200 counted the notification
    sent: it was lost without a word. A webhook's URL is the person's to fix."""
    seen: list[tuple[str, str]] = []
    async with hostile_receiver(seen) as url:
        notifier = await notify_twice(url, path)
    assert (notifier.stats.sent, notifier.stats.failed) == (1, 2)
    assert ("GET", "/elsewhere") not in seen and ("POST", "/elsewhere") not in seen
    assert seen.count(("POST", path)) == 2  # a redirect does not get better by asking again


@pytest.mark.parametrize(
    "bad_url", ["http://hooks..example.com/x", f"https://{'a' * 64}.example.com/x"]
)
async def test_a_host_name_that_cannot_be_looked_up_costs_its_notification_only(
    bad_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """An empty or over-long label (a typo in the url) failed in the resolver's idna encoding
    with a UnicodeError, which no handler took: the notify loop ended with a traceback."""
    seen: list[tuple[str, str]] = []
    async with hostile_receiver(seen) as url:
        notifier = await notify_twice(url, "", bad_url=bad_url)
    assert (notifier.stats.sent, notifier.stats.failed) == (1, 2)
    assert notifier.stats.retried == 0  # the name does not get better by asking again
    assert "not sent" in caplog.text
    assert bad_url.split("/")[2] not in caplog.text  # the url holds the hook's secret


async def test_a_switching_protocols_answer_is_not_counted_sent() -> None:
    """Any status under 300 counted as sent, so a 101 (the receiver switched protocols instead
    of taking the POST) counted a notification no hook accepted."""
    seen: list[tuple[str, str]] = []
    async with hostile_receiver(seen) as url:
        notifier = await notify_twice(url, "/switch")
    assert (notifier.stats.sent, notifier.stats.failed) == (1, 2)


@pytest.mark.parametrize("bad_url", ["http://256.1.1.1:9/x", "http://12345678901/hook"])
async def test_a_url_aiohttp_refuses_at_request_time_is_not_retried(
    bad_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A host that reads as an IPv4 address but is none passes the config's check, and aiohttp
    refuses it only at the POST (``InvalidURL``, a ``ClientError``): it was retried as if the hook
    were down, every notification ``max_attempts`` times. Asking again gets the same answer."""
    WebhookConfig(url=SecretStr(bad_url))  # the config takes it: only the POST can tell
    seen: list[tuple[str, str]] = []
    async with hostile_receiver(seen) as url:
        notifier = await notify_twice(url, "", bad_url=bad_url)
    assert (notifier.stats.sent, notifier.stats.failed) == (1, 2)
    assert notifier.stats.retried == 0
    said = [r.getMessage() for r in caplog.records if "not sent" in r.getMessage()]
    assert len(said) == 2, said  # one line per notification, no retry storm
    assert bad_url.split("/")[2] not in caplog.text  # the url holds the hook's secret


async def test_an_error_answer_quoting_the_url_leaks_no_secret_and_writes_one_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A receiver's error page quotes the path it was sent to (n8n, Express): the url was
    redacted only whole, so its token reached vigil.log alone, and the page's line breaks wrote
    lines into vigil.log that read as vigil's own."""
    token = "3f2a9c1e-8b7d-4e6f-a1b2-c3d4e5f6a7b8"
    seen: list[tuple[str, str]] = []
    async with hostile_receiver(seen) as url:
        with caplog.at_level(logging.WARNING, logger="api.notify.notifier"):
            notifier = await notify_twice(url, f"/echo/{token}")
        config = NotifyConfig(webhooks=(WebhookConfig(url=SecretStr(f"{url}/echo/{token}")),))
    assert (notifier.stats.sent, notifier.stats.failed) == (1, 2)
    said = [r.getMessage() for r in caplog.records if "not sent" in r.getMessage()]
    assert said and all("\n" not in line and "\r" not in line for line in said)
    assert any(token in line for line in said)  # as the peer wrote it, before the log's filter
    redactor = Redactor(config.secret_values())  # the filter every log handler carries
    assert all(token not in redactor.redact(line)[0] for line in said)
