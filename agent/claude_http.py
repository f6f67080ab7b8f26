"""The Messages API's answers read within a bound, compressed or not.

The SDK's HTTP client inflated a ``Content-Encoding: gzip`` body whole before anything looked at
its size: one answer of 1 MB that inflates to 1 GiB took the daemon to 2.2 GB of memory, and a
larger one would have taken it down (the answer's own check, ``MAX_ANSWER_BYTES``, runs on the
text the SDK hands over, after all that). Here the transport reads the body itself, at most
``MAX_BODY_BYTES`` on the wire and inflated, and hands the SDK a plain body; past the bound it
raises, which the SDK reports as a connection error: a failed try, retried, then the fallback.

Only the encodings asked for are read (gzip, deflate): a body in another is refused.
Imported only by a daemon that has a key (``claude_client.build_anthropic_client``).
"""

from __future__ import annotations

import zlib
from typing import Final

import httpx2

#: a real answer is a few kB (its text at most ``claude_schema.MAX_ANSWER_BYTES``, 64 KiB)
MAX_BODY_BYTES: Final = 4 * 1024 * 1024
ACCEPTED_ENCODINGS: Final = "gzip, deflate"
_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


class BoundedAnswers(httpx2.AsyncBaseTransport):
    def __init__(
        self, inner: httpx2.AsyncBaseTransport | None = None, max_bytes: int = MAX_BODY_BYTES
    ) -> None:
        self._inner = inner or httpx2.AsyncHTTPTransport()
        self._max = max_bytes

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        try:
            raw = await self._read(response)
        finally:
            await response.aclose()
        body = inflated(raw, response.headers.get("content-encoding", ""), self._max)
        headers = [
            (name, value)
            for name, value in response.headers.raw
            if name.lower() not in (b"content-encoding", b"content-length")
        ]
        return httpx2.Response(
            response.status_code,
            headers=headers,
            content=body,
            request=request,
            extensions=response.extensions,
        )

    async def _read(self, response: httpx2.Response) -> bytes:
        chunks, size = [], 0
        async for chunk in response.stream:  # type: ignore[union-attr]
            size += len(chunk)
            if size > self._max:
                raise httpx2.DecodingError(f"an answer over {self._max:,} bytes is not read")
            chunks.append(chunk)
        return b"".join(chunks)

    async def aclose(self) -> None:
        await self._inner.aclose()


def inflated(raw: bytes, content_encoding: str, max_bytes: int) -> bytes:
    """``raw`` decoded as its ``Content-Encoding`` says (the last applied first), never past
    ``max_bytes``; ``httpx2.DecodingError`` past them, or for an encoding not asked for."""
    body = raw
    codings = [c.strip().lower() for c in content_encoding.split(",") if c.strip()]
    for coding in reversed(codings):
        if coding == "identity":
            continue
        wbits = _WBITS.get(coding)
        if wbits is None:
            raise httpx2.DecodingError(f"an answer encoded {coding[:40]!r}, which was not asked")
        inflater = zlib.decompressobj(wbits)
        try:
            body = inflater.decompress(body, max_bytes + 1)
        except zlib.error as exc:
            raise httpx2.DecodingError(f"an answer that is not {coding}: {exc}") from None
        if len(body) > max_bytes or inflater.unconsumed_tail:
            raise httpx2.DecodingError(f"an answer inflating past {max_bytes:,} bytes")
    return body


__all__ = ["ACCEPTED_ENCODINGS", "MAX_BODY_BYTES", "BoundedAnswers", "inflated"]
