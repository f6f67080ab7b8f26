"""A loopback HTTP server that answers every GET with one error: the exchange that only says no
(a 401, a 429 with its Retry-After, 503s), for what the CLI makes of a peer's error text."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from aiohttp import web


@contextmanager
def answering(status: int, body: str, headers: dict[str, str] | None = None) -> Iterator[str]:
    """The base URL of a server (its own thread and loop, so a synchronous ``main`` can call it)
    answering every GET ``status`` with the JSON ``body``; stopped when the block ends."""
    ready, stop, found = threading.Event(), threading.Event(), []

    async def serve() -> None:
        async def handle(_request: web.Request) -> web.Response:
            return web.Response(
                status=status, text=body, content_type="application/json", headers=headers
            )

        app = web.Application()
        app.router.add_route("GET", "/{tail:.*}", handle)
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        found.append(f"http://127.0.0.1:{runner.addresses[0][1]}")
        ready.set()
        while not stop.is_set():
            await asyncio.sleep(0.05)
        await runner.cleanup()

    thread = threading.Thread(target=lambda: asyncio.run(serve()))
    thread.start()
    try:
        assert ready.wait(60), "the error server did not start"
        yield found[0]
    finally:
        stop.set()
        thread.join()


__all__ = ["answering"]
