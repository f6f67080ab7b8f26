"""A whole answer sent from a pure ASGI middleware (admission, the rate ceiling, the proxy)."""

from __future__ import annotations

from starlette.types import Scope, Send


async def send_answer(
    send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]]
) -> None:
    """``status`` with ``body``; ``headers`` without a content length (it is set here)."""
    sent = [(k, v) for k, v in headers if k != b"content-length"]
    sent.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": sent})
    await send({"type": "http.response.body", "body": body})


def first_header(scope: Scope, name: bytes) -> bytes | None:
    """The first value of header ``name`` (lower case), as Starlette's ``Headers.get`` reads it:
    ``dict(scope["headers"])`` kept the last, so a request with two ``Authorization`` headers was
    judged by one in the API process and by the other behind it."""
    for key, value in scope["headers"]:
        if key == name:
            return bytes(value)
    return None


__all__ = ["first_header", "send_answer"]
