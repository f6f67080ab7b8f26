"""A webhook receiver on loopback (aiohttp): records every POST by path, and answers with the
statuses a test scripts per path (then 200), for the notification tests."""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


@dataclass
class Receiver:
    url: str
    received: dict[str, list[Any]] = field(default_factory=lambda: defaultdict(list))
    attempts: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    script: dict[str, list[tuple[int, dict[str, str]]]] = field(default_factory=dict)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)

    def events(self, path: str) -> list[str]:
        """The ``event`` of each generic-JSON body received on ``path``."""
        return [body["event"] for body in self.received[path]]

    async def wait_until(self, check: Any, timeout_secs: float) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_secs
        while not check():
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise TimeoutError(f"the receiver never saw it; got {dict(self.received)}")
            self.arrived.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.arrived.wait(), remaining)


@contextlib.asynccontextmanager
async def webhook_receiver() -> AsyncIterator[Receiver]:
    receiver = Receiver(url="")

    async def handle(request: web.Request) -> web.Response:
        path = request.path
        receiver.attempts[path] += 1
        scripted = receiver.script.get(path)
        if scripted:
            status, headers = scripted.pop(0)
            return web.json_response({"ok": False}, status=status, headers=headers)
        receiver.received[path].append(await request.json())
        receiver.arrived.set()
        return web.json_response({"ok": True})

    app = web.Application()
    app.router.add_post("/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    receiver.url = f"http://127.0.0.1:{port}"
    try:
        yield receiver
    finally:
        await runner.cleanup()
