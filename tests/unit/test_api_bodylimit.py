"""``BodyLimit`` at the ASGI level: a declared length it cannot even read as an int is over it."""

from __future__ import annotations

from starlette.types import Message, Receive, Scope, Send

from api.bodylimit import MAX_BODY_BYTES, BodyLimit


async def _refused(length: bytes) -> list[Message]:
    sent: list[Message] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        raise AssertionError("the body was let through to the app")

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    scope: Scope = {"type": "http", "headers": [(b"content-length", length)]}
    await BodyLimit(app)(scope, receive, send)
    return sent


async def test_a_content_length_of_5000_digits_is_a_413_not_a_500() -> None:
    # int() refuses more than 4,300 digits: read whole, the length raised instead of refusing
    sent = await _refused(b"9" * 5000)
    assert sent[0]["type"] == "http.response.start" and sent[0]["status"] == 413


async def test_one_byte_over_the_ceiling_is_a_413() -> None:
    sent = await _refused(str(MAX_BODY_BYTES + 1).encode())
    assert sent[0]["status"] == 413
