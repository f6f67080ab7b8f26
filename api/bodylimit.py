"""A ceiling on a request's body: over it, ``413`` and the rest is not read.

Every body the API takes is a few fields of text (the notes are cut to 600 characters in a
prompt); without a ceiling one was read whole into memory (the daemon's, with ``isolation =
"inline"`` or through the API process's forward) and saved into ``runner_state.json``: 100 MB of
notes cost the daemon 511 MB more peak memory and a 100 MB state file rewritten at every save.
"""

from __future__ import annotations

import orjson
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.asgi import first_header, send_answer

MAX_BODY_BYTES = 1 << 20


class BodyTooLargeError(HTTPException):
    """Raised from ``receive``: an HTTPException, so FastAPI's body reading passes it on (any
    other error there becomes its 400) and the app answers it like the middleware does."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(413, f"the request body is over {max_bytes:,} bytes")


class BodyLimit:
    """Pure ASGI middleware: a declared ``Content-Length`` over the ceiling is refused before any
    read, a streamed body as soon as it passes it."""

    def __init__(self, app: ASGIApp, *, max_bytes: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self._max = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = first_header(scope, b"content-length") or b""
        # a length of more digits than the ceiling's is over it: int() of 4,301 digits raises
        if declared.isdigit() and (
            len(declared) > len(str(self._max)) or int(declared) > self._max
        ):
            await self._refuse(send)
            return
        received, started = 0, False

        async def limited() -> Message:
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            if received > self._max:
                raise BodyTooLargeError(self._max)
            return message

        async def tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, limited, tracked)
        except BodyTooLargeError:
            if started:
                raise
            await self._refuse(send)

    async def _refuse(self, send: Send) -> None:
        body = orjson.dumps({"detail": BodyTooLargeError(self._max).detail})
        await send_answer(send, 413, body, [(b"content-type", b"application/json")])


__all__ = ["MAX_BODY_BYTES", "BodyLimit", "BodyTooLargeError"]
