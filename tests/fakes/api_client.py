"""Talking to a running daemon's API from a test: find it (``api.json``), read an SSE stream."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp


async def wait_for_api(state_dir: Path, timeout_secs: float = 150.0) -> tuple[str, str]:
    """The API's URL and token once the daemon has published them (after its warm-up)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_secs
    while loop.time() < deadline:
        try:
            url = json.loads((state_dir / "api.json").read_text())["url"]
            return url, (state_dir / "api_token").read_text().strip()
        except (OSError, ValueError, KeyError):
            await asyncio.sleep(0.2)
    raise TimeoutError(f"no API published in {state_dir} within {timeout_secs} s")


async def sse_events(response: aiohttp.ClientResponse) -> AsyncIterator[tuple[str, str]]:
    """(event, data) pairs; a comment line is yielded as ("comment", text)."""
    event, data = "message", []
    async for raw in response.content:
        line = raw.decode().rstrip("\n")
        if line.startswith(":"):
            yield "comment", line[1:].strip()
        elif line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].strip())
        elif not line and data:
            yield event, "\n".join(data)
            event, data = "message", []
