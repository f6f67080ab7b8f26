"""Headless Chromium driven over the DevTools protocol (a helper module; no tests).

For pages that live (the dashboard keeps a stream open, so ``--dump-dom`` with a virtual time
budget never settles): the test opens the page, types into it, waits for conditions evaluated in
the page, reads the DOM and takes a screenshot, while every console message, uncaught exception
and failed load or CSP violation (``Log.entryAdded``) is collected for the test to fail on.
The browser is Debian's chromium (``scripts/ensure-chromium``); its own DevTools websocket is the
peer, through aiohttp's websocket client.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import os
import signal
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from browser_support import HEADLESS_FLAGS, require_chromium

START_TIMEOUT_SECS = 30.0
COMMAND_TIMEOUT_SECS = 30.0


@dataclass
class Page:
    ws: aiohttp.ClientWebSocketResponse
    session_id: str = ""
    console: list[dict[str, Any]] = field(default_factory=list)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _pending: dict[int, asyncio.Future[dict[str, Any]]] = field(default_factory=dict)

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        ident = next(self._ids)
        message: dict[str, Any] = {"id": ident, "method": method, "params": params}
        if self.session_id:
            message["sessionId"] = self.session_id
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[ident] = future
        await self.ws.send_str(json.dumps(message))
        reply = await asyncio.wait_for(future, COMMAND_TIMEOUT_SECS)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        result: dict[str, Any] = reply.get("result", {})
        return result

    async def evaluate(self, expression: str) -> Any:
        """The expression's value in the page (awaited if a promise); a page exception raises."""
        result = await self.send(
            "Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    async def wait_for(self, expression: str, timeout_secs: float = 60.0) -> Any:
        """Poll ``expression`` in the page until it is truthy; its value. While a page loads the
        expression may throw (no body yet): that counts as not yet."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_secs
        last = "false"
        while True:
            try:
                value = await self.evaluate(expression)
            except RuntimeError as exc:
                value, last = None, str(exc)
            if value:
                return value
            if loop.time() > deadline:
                raise TimeoutError(f"not true in {timeout_secs} s: {expression} ({last[:300]})")
            await asyncio.sleep(0.25)

    async def screenshot(self, path: Path) -> bytes:
        shot = await self.send("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        data = base64.b64decode(shot["data"])
        path.write_bytes(data)
        return data

    def errors(self) -> list[dict[str, Any]]:
        """Console errors and warnings, uncaught exceptions, failed loads, CSP violations."""
        return [e for e in self.console if e["level"] in {"error", "warning"}]

    async def _read(self) -> None:
        async for msg in self.ws:
            if msg.type != aiohttp.WSMsgType.TEXT:
                continue
            data = json.loads(msg.data)
            if "id" in data:
                future = self._pending.pop(data["id"], None)
                if future is not None and not future.done():
                    future.set_result(data)
            else:
                self._on_event(data.get("method", ""), data.get("params", {}))

    def _on_event(self, method: str, params: dict[str, Any]) -> None:
        if method == "Runtime.consoleAPICalled":
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in params["args"])
            level = {"warning": "warning", "error": "error", "assert": "error"}.get(
                params["type"], "info"
            )
            self.console.append({"level": level, "text": text, "source": "console"})
        elif method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text", "")
            self.console.append({"level": "error", "text": text, "source": "exception"})
        elif method == "Log.entryAdded":
            entry = params["entry"]
            self.console.append(
                {"level": entry["level"], "text": entry.get("text", ""), "source": entry["source"]}
            )


@contextlib.asynccontextmanager
async def open_browser(
    profile_dir: Path, width: int = 1280, height: int = 1800
) -> AsyncIterator[Page]:
    """A headless Chromium with one blank page attached; killed with its children on exit."""
    browser = require_chromium()
    profile_dir.mkdir(parents=True, exist_ok=False)
    log = (profile_dir.parent / f"{profile_dir.name}.log").open("wb")
    process = subprocess.Popen(
        [str(browser), *HEADLESS_FLAGS, f"--user-data-dir={profile_dir}",
         "--remote-debugging-port=0", f"--window-size={width},{height}", "about:blank"],
        stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        endpoint = await _endpoint(profile_dir, process)
        async with (
            aiohttp.ClientSession() as http,
            http.ws_connect(endpoint, max_msg_size=0) as ws,
        ):
            page = Page(ws)
            reader = asyncio.create_task(page._read())
            try:
                target = await page.send("Target.createTarget", url="about:blank")
                attached = await page.send(
                    "Target.attachToTarget", targetId=target["targetId"], flatten=True
                )
                page.session_id = attached["sessionId"]
                for domain in ("Runtime.enable", "Log.enable", "Page.enable"):
                    await page.send(domain)
                await page.send(
                    "Emulation.setDeviceMetricsOverride",
                    width=width, height=height, deviceScaleFactor=1, mobile=False,
                )  # fmt: skip
                yield page
            finally:
                reader.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await reader
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        log.close()


async def _endpoint(profile_dir: Path, process: subprocess.Popen[bytes]) -> str:
    """The browser's DevTools websocket, from the DevToolsActivePort file it writes."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + START_TIMEOUT_SECS
    port_file = profile_dir / "DevToolsActivePort"
    while loop.time() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"chromium exited {process.returncode} before DevTools listened")
        with contextlib.suppress(OSError, ValueError):
            port, path = port_file.read_text().split()[:2]
            return f"ws://127.0.0.1:{int(port)}{path}"
        await asyncio.sleep(0.1)
    raise TimeoutError(f"chromium did not open DevTools within {START_TIMEOUT_SECS} s")


__all__ = ["Page", "open_browser"]
