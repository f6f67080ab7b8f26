"""A whole answer sent from a pure ASGI middleware (admission, the rate ceiling, the proxy)."""

from __future__ import annotations

from starlette.types import Send


async def send_answer(
    send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]]
) -> None:
    """``status`` with ``body``; ``headers`` without a content length (it is set here)."""
    sent = [(k, v) for k, v in headers if k != b"content-length"]
    sent.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": sent})
    await send({"type": "http.response.body", "body": body})


__all__ = ["send_answer"]
