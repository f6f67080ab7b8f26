"""The log line of an API server that starts. In ``isolation = "process"`` (the default) the daemon
serves a private API on a free loopback port for its API process alone, and logged it as
``API on http://127.0.0.1:43567 (docs .../docs)`` beside the operator's ``API on
http://127.0.0.1:8780``: a person reading the log (and, with port 8780 taken, only the former)
took the private port for the API. It now says what it is; the published API's line is as before."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
from fastapi import FastAPI

from api.server import ApiServer


async def _started_lines(server: ApiServer, caplog: pytest.LogCaptureFixture) -> list[str]:
    with caplog.at_level(logging.INFO, logger="api.server"):
        serving = asyncio.create_task(server.run())
        await asyncio.wait_for(server.started.wait(), 60)
        serving.cancel()
        with pytest.raises(asyncio.CancelledError):
            await serving
    return [r.getMessage() for r in caplog.records if r.name == "api.server"]


async def test_the_daemons_private_link_is_not_logged_as_the_api(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = ApiServer(FastAPI(), "127.0.0.1", 0)  # as api_wiring builds the private one
    (line,) = await _started_lines(server, caplog)
    assert not line.startswith("API on") and "docs" not in line
    assert line == (
        f"the daemon's private API for its API process on {server.url} "
        "(not the operator's API: that is in api.json)"
    )


async def test_the_published_api_says_where_it_is(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server = ApiServer(FastAPI(), "127.0.0.1", 0, tmp_path)
    (line,) = await _started_lines(server, caplog)
    assert line == f"API on {server.url} (docs {server.url}/docs)"
