"""Talking to a running daemon's API from a test: find it (``api.json``), ask it as a polite client
does (a request it sheds is asked again after its Retry-After), read an SSE stream."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp

#: how often a request the API sheds (503 or 429 with Retry-After: busy under load, over its
#: request ceiling, its daemon not answering) is asked again before its answer counts
SHED_RETRIES = 5


async def wait_for_api(state_dir: Path, proc: asyncio.subprocess.Process) -> tuple[str, str]:
    """The API's URL and token once the daemon ``proc`` has published them (after its warm-up),
    however long its start takes on a loaded host (the test's timeout bounds a hang); a daemon that
    exits first fails the test."""
    while True:
        try:
            url = json.loads((state_dir / "api.json").read_text())["url"]
            return url, (state_dir / "api_token").read_text().strip()
        except (OSError, ValueError, KeyError):
            if proc.returncode is not None:
                raise AssertionError(
                    f"the daemon exited ({proc.returncode}) before its API"
                ) from None
            await asyncio.sleep(0.2)  # polling files another process writes


async def ask(http: aiohttp.ClientSession, method: str, url: str, **kwargs: Any) -> tuple[int, Any]:
    """The status and JSON body of ``method url``, asking again after the wait a shed answer names
    (at most ``SHED_RETRIES`` times): the API sheds load by design, and says when to come back."""
    for _ in range(SHED_RETRIES):
        async with http.request(method, url, **kwargs) as r:
            retry_after = r.headers.get("Retry-After")
            if r.status not in {429, 503} or retry_after is None:
                return r.status, await r.json()
        await asyncio.sleep(float(retry_after))  # the API's own wait, in real seconds
    async with http.request(method, url, **kwargs) as r:
        return r.status, await r.json()


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
