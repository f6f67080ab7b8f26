"""The OpenAI-compatible embedder's reading of an answer, against a real loopback server: a 200
was read whole whatever its size (one text's vector is tens of kB), and an error page was read
whole and decoded strictly, so one that was not UTF-8 raised UnicodeDecodeError past every
caller's StoreUnavailableError catch."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from memory.embeddings import EMBEDDINGS_MAX_BYTES, OpenAIEmbedder
from memory.port import StoreUnavailableError

VECTOR = b'{"data": [{"index": 0, "embedding": [0.6, 0.8]}]}'


@pytest.fixture
async def server() -> AsyncIterator[tuple[str, dict[str, web.Response]]]:
    answer: dict[str, web.Response] = {}

    async def embeddings(_request: web.Request) -> web.Response:
        return answer["response"]

    app = web.Application()
    app.router.add_post("/v1/embeddings", embeddings)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield f"http://127.0.0.1:{runner.addresses[0][1]}", answer
    await runner.cleanup()


async def test_an_answer_past_the_bound_is_unavailable_unread(
    server: tuple[str, dict[str, web.Response]],
) -> None:
    url, answer = server
    # embeddings still, padded with spaces past the bound: taken as they came, read whole
    answer["response"] = web.Response(
        body=b" " * EMBEDDINGS_MAX_BYTES + VECTOR, content_type="application/json"
    )
    with pytest.raises(StoreUnavailableError, match=f"over {EMBEDDINGS_MAX_BYTES >> 20} MiB"):
        await OpenAIEmbedder(url, "m").embed(["x"])


async def test_an_answer_within_the_bound_is_read(
    server: tuple[str, dict[str, web.Response]],
) -> None:
    url, answer = server
    answer["response"] = web.Response(
        body=b" " * (EMBEDDINGS_MAX_BYTES - len(VECTOR)) + VECTOR, content_type="application/json"
    )
    assert await OpenAIEmbedder(url, "m").embed(["x"]) == [(0.6, 0.8)]


@pytest.mark.parametrize(
    "body",
    [b"\xff\xfe erreur \xe9", b"x" * (EMBEDDINGS_MAX_BYTES * 2)],
    ids=["not UTF-8", "huge"],
)
async def test_an_error_page_is_unavailable_quoting_its_head(
    server: tuple[str, dict[str, web.Response]], body: bytes
) -> None:
    url, answer = server
    answer["response"] = web.Response(status=503, body=body, content_type="text/html")
    with pytest.raises(StoreUnavailableError, match="embeddings server answered 503") as info:
        await OpenAIEmbedder(url, "m").embed(["x"])
    assert len(str(info.value)) < 300
