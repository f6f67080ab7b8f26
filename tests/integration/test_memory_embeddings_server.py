"""The OpenAI-compatible embeddings adapter against a real loopback HTTP server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from fakes.memory_support import T0, open_and_exit
from fakes.virtual_time import drive

from core.clock import VirtualClock
from memory.config import MemoryConfig
from memory.embeddings import OpenAIEmbedder
from memory.outbox import MemoryOutbox
from memory.port import StoreUnavailableError
from memory.sqlite_store import SqliteMemoryStore
from memory.writeback import MemoryWriter


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


#: answers of a 200 that are no embeddings of the texts (a proxy's page, another API, a broken
#: server): each was taken as vectors or raised past the callers' StoreUnavailableError catch
HOSTILE_ANSWERS = {
    "a list": b"[1, 2]",
    "not JSON": b'{"data": [',
    "data null": b'{"data": null}',
    "data a string": b'{"data": "x"}',
    "item without embedding": b'{"data": [{"index": 0}]}',
    "item a number": b'{"data": [7]}',
    "embedding a string": b'{"data": [{"index": 0, "embedding": "abc"}]}',
    "a value that is text": b'{"data": [{"index": 0, "embedding": ["x", 1.0]}]}',
    "a value true": b'{"data": [{"index": 0, "embedding": [true, 1.0]}]}',
    "NaN": b'{"data": [{"index": 0, "embedding": [NaN, 1.0]}]}',
    "Infinity": b'{"data": [{"index": 0, "embedding": [Infinity, 1.0]}]}',
    "past float32": b'{"data": [{"index": 0, "embedding": [1e39, 1.0]}]}',
    "empty": b'{"data": [{"index": 0, "embedding": []}]}',
    "index text": b'{"data": [{"index": "a", "embedding": [1.0]}]}',
}


@pytest.fixture
async def hostile() -> AsyncIterator[tuple[str, dict[str, bytes]]]:
    answer = {"body": b""}

    async def embeddings(_request: web.Request) -> web.Response:
        return web.Response(body=answer["body"], content_type="application/json")

    app = web.Application()
    app.router.add_post("/v1/embeddings", embeddings)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield f"http://127.0.0.1:{port}", answer
    await runner.cleanup()


@pytest.mark.parametrize("body", HOSTILE_ANSWERS.values(), ids=HOSTILE_ANSWERS.keys())
async def test_an_answer_that_is_no_embeddings_is_unavailable(
    hostile: tuple[str, dict[str, bytes]], body: bytes
) -> None:
    url, answer = hostile
    answer["body"] = body
    with pytest.raises(StoreUnavailableError, match="embeddings server answered"):
        await OpenAIEmbedder(url, "m").embed(["x"])


async def test_the_write_back_keeps_a_trade_pending_past_a_hostile_answer(
    hostile: tuple[str, dict[str, bytes]], tmp_path: Path
) -> None:
    """The lesson's embedding of an answer without one: its KeyError ended the writer's flush
    (a bus handler) in a traceback at each wake-up. Now it is the store unavailable: the trade
    stays pending, counted, and is written once the server answers embeddings."""
    url, answer = hostile
    answer["body"] = HOSTILE_ANSWERS["item without embedding"]
    clock = VirtualClock(T0)
    writer = MemoryWriter(
        clock,
        SqliteMemoryStore(tmp_path / "memory.db"),
        MemoryOutbox(tmp_path / "memory.jsonl"),
        MemoryConfig(),
        OpenAIEmbedder(url, "m"),
    )
    open_and_exit(writer, 0)
    assert await drive(clock, writer.flush()) == 0  # the retries sleep on the virtual clock
    assert writer.pending() == 1 and writer.stats.store_failures == 1
    answer["body"] = b'{"data": [{"index": 0, "embedding": [0.6, 0.8]}]}'
    assert await writer.flush() == 1 and writer.pending() == 0
    (lesson,) = await writer._store.list_insights()
    assert lesson.embedding == pytest.approx((0.6, 0.8))
    await writer._store.close()
