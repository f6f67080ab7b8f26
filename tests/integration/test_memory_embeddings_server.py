"""The OpenAI-compatible embeddings adapter against a real loopback HTTP server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from memory.embeddings import OpenAIEmbedder
from memory.port import StoreUnavailableError


@pytest.fixture
async def server() -> AsyncIterator[tuple[str, list[dict[str, Any]]]]:
    seen: list[dict[str, Any]] = []

    async def embeddings(request: web.Request) -> web.Response:
        body = await request.json()
        seen.append({"body": body, "auth": request.headers.get("Authorization")})
        if body["model"] == "broken":
            return web.json_response({"error": "model not found"}, status=404)
        data = [
            {"object": "embedding", "index": i, "embedding": [float(len(t)), 1.0, 0.0]}
            for i, t in reversed(list(enumerate(body["input"])))  # out of order on purpose
        ]
        return web.json_response({"object": "list", "data": data, "model": body["model"]})

    app = web.Application()
    app.router.add_post("/v1/embeddings", embeddings)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield f"http://127.0.0.1:{port}", seen
    await runner.cleanup()


async def test_embeds_in_input_order(server: tuple[str, list[dict[str, Any]]]) -> None:
    url, seen = server
    embedder = OpenAIEmbedder(url, "nomic-embed-text", api_key="k")
    vectors = await embedder.embed(["ab", "abcd"])
    assert vectors == [(2.0, 1.0, 0.0), (4.0, 1.0, 0.0)]
    assert seen[0]["body"] == {"model": "nomic-embed-text", "input": ["ab", "abcd"]}
    assert seen[0]["auth"] == "Bearer k"


async def test_server_error_is_unavailable(server: tuple[str, list[dict[str, Any]]]) -> None:
    url, _seen = server
    with pytest.raises(StoreUnavailableError, match="404"):
        await OpenAIEmbedder(url, "broken").embed(["x"])


async def test_unreachable_is_unavailable() -> None:
    with pytest.raises(StoreUnavailableError, match="unreachable"):
        await OpenAIEmbedder("http://127.0.0.1:9", "m", timeout_secs=2).embed(["x"])
