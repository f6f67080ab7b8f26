"""One JSON GET over aiohttp with failures typed by what the cache should do next.

429/418 (rate limit, ban) and 5xx are ``SourceFailedError`` (back off, at least ``Retry-After``);
other 4xx mean the provider will not answer this request: ``SourceNotAvailableError``. A body that
is not JSON, or JSON of the wrong shape (``parse_body``), or over ``MAX_JSON_BYTES`` (a page:
``MAX_BODY_BYTES``), is a failed attempt, never a value.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

import aiohttp
import orjson
from pydantic import BaseModel, ValidationError

from derivatives.cache import SourceFailedError, SourceNotAvailableError

M = TypeVar("M", bound=BaseModel)

USER_AGENT = "vigil/0.1 (+derivatives context)"
BODY_SNIPPET_CHARS = 160
#: no answer of these providers comes near it (DeFiLlama's stablecoins, the largest, is well under
#: a few MiB); a bigger one would be read into memory whole within the timeout, on loopback GiBs
MAX_BODY_BYTES = 16 << 20
#: JSON is decoded on the event loop (orjson holds the GIL, so a thread would not free the loop)
#: at ~10 MiB a second at worst (many small objects): 4 MiB holds DeFiLlama's stablecoins, the
#: largest answer, with room, and stalls the loop well under a second
MAX_JSON_BYTES = 4 << 20


async def get_json(url: str, params: Mapping[str, str], *, what: str) -> Any:
    """GET ``url`` and decode its JSON body; raises the errors described in the module docstring."""
    body = await _get(url, params, what=what, max_bytes=MAX_JSON_BYTES)
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        raise SourceFailedError(f"{what}: malformed body (not JSON): {snippet(body)}") from None


async def get_text(url: str, params: Mapping[str, str], *, what: str) -> str:
    """GET ``url`` and decode its body as text (an HTML page), with ``get_json``'s errors."""
    return (await _get(url, params, what=what, max_bytes=MAX_BODY_BYTES)).decode("utf-8", "replace")


async def _get(url: str, params: Mapping[str, str], *, what: str, max_bytes: int) -> bytes:
    try:
        async with (
            aiohttp.ClientSession(headers={"User-Agent": USER_AGENT}) as session,
            session.get(url, params=dict(params)) as response,
        ):
            body = await _read_bounded(response, what, max_bytes)
            status = response.status
            retry_after = _seconds(response.headers.get("Retry-After"))
    except aiohttp.ClientError as exc:
        raise SourceFailedError(f"{what}: connection failed: {type(exc).__name__}: {exc}") from exc
    if status in (418, 429):
        kind = "banned (418)" if status == 418 else "rate limited (429)"
        raise SourceFailedError(f"{what}: {kind}", retry_after_secs=retry_after)
    if status >= 500:
        raise SourceFailedError(f"{what}: server error {status}: {snippet(body)}")
    if status >= 400:
        raise SourceNotAvailableError(f"{what}: refused with HTTP {status}: {snippet(body)}")
    return body


async def _read_bounded(response: aiohttp.ClientResponse, what: str, max_bytes: int) -> bytes:
    chunks, size = [], 0
    async for chunk in response.content.iter_any():
        size += len(chunk)
        if size > max_bytes:
            raise SourceFailedError(f"{what}: a body over {max_bytes >> 20} MiB, not read")
        chunks.append(chunk)
    return b"".join(chunks)


def parse_body(model: type[M], payload: Any, *, what: str) -> M:
    """Validate a decoded body; a wrong shape is a failed attempt naming the first bad field."""
    try:
        return model.model_validate(payload)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = snippet(".".join(str(part) for part in first["loc"])) or "<body>"  # a dict key
        raise SourceFailedError(f"{what}: malformed body: {where}: {first['msg']}") from None


def snippet(body: bytes | str) -> str:
    """A provider's text as a reason may quote it: it reaches logs, people's terminals and the
    decider's prompt, so it is cut short and control and bidi characters become spaces."""
    head = body[: BODY_SNIPPET_CHARS * 8]
    text = head.decode("utf-8", "replace") if isinstance(head, bytes) else head
    text = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    cut = len(text) > BODY_SNIPPET_CHARS or len(head) < len(body)
    return text[:BODY_SNIPPET_CHARS] + "..." if cut else text


def _seconds(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


__all__ = ["get_json", "get_text", "parse_body", "snippet"]
