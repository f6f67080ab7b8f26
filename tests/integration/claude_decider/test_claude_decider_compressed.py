"""Answers sent compressed, through the real SDK: a gzip answer is read as the plain one, and
one that inflates past the bound (a gzip bomb from a proxy at ``base_url``) is a failed try, not
gigabytes inflated (1 MB inflating to 1 GiB took the daemon to 2.2 GB)."""

from __future__ import annotations

import gzip
import zlib
from dataclasses import replace

import httpx2
import orjson
import pytest
from fakes.claude_support import Make, answer, snapshot
from fakes.messages_api import FakeMessagesApi, ScriptedResponse, json_message

from agent.claude_http import MAX_BODY_BYTES, inflated


def _gzipped(scripted: ScriptedResponse) -> ScriptedResponse:
    assert isinstance(scripted.body, dict)
    body = gzip.compress(orjson.dumps(scripted.body))
    return replace(scripted, body=body, headers={"content-encoding": "gzip"})


def _bomb(inflated_bytes: int) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = b" " * (1 << 20)
    parts = [packer.compress(block) for _ in range(inflated_bytes // len(block))]
    return b"".join(parts) + packer.flush()


async def test_a_gzip_answer_is_read_as_the_plain_one(api: FakeMessagesApi, make: Make) -> None:
    api.script(_gzipped(json_message(answer())))
    decision = await make().decide(snapshot())
    assert decision.decided_by == "claude"
    assert "gzip" in api.requests[0].headers.get("accept-encoding", "")


async def test_an_answer_inflating_past_the_bound_is_a_failed_try(
    api: FakeMessagesApi, make: Make
) -> None:
    bomb = ScriptedResponse(body=_bomb(64 << 20), headers={"content-encoding": "gzip"})
    api.script(bomb, bomb)
    decision = await make().decide(snapshot())
    assert decision.decided_by == "fallback"
    assert [a["kind"] for a in decision.attempts] == ["connection_error"] * 2


def test_inflating_stops_at_the_bound() -> None:
    assert inflated(gzip.compress(b"{}"), "gzip", 100) == b"{}"
    assert inflated(b"{}", "identity", 100) == b"{}"
    with pytest.raises(httpx2.DecodingError, match="inflating past 1,024 bytes"):
        inflated(_bomb(8 << 20), "gzip", 1024)
    with pytest.raises(httpx2.DecodingError, match="'br', which was not asked"):
        inflated(b"x", "br", 1024)
    with pytest.raises(httpx2.DecodingError, match="not gzip"):
        inflated(b"plain", "gzip", 1024)
    assert MAX_BODY_BYTES >= 64 * 1024  # a whole answer's text fits
