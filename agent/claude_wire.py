"""What the Messages API handed back, read without trusting it: the answer's text, a status's
kind and detail, a server's retry-after, and what the SDK client was built with (its timeout, a key
it may be given). The SDK builds a message without validating it, so any field may be anything."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the SDK is imported when a client is built or called, not with this module
    import anthropic


def usable_key(key: str) -> bool:
    """Printable ASCII without spaces, as every Anthropic key is."""
    return key.isascii() and key.isprintable() and not any(c.isspace() for c in key)


def whole_call_secs(sdk: anthropic.AsyncAnthropic) -> float | None:
    """The SDK client's timeout (``AgentConfig.timeout_secs``) as a bound on the whole call; None
    when it was built with a per-phase ``httpx.Timeout`` (then its read bound only)."""
    timeout = sdk.timeout
    if isinstance(timeout, int | float):
        return float(timeout)
    return getattr(timeout, "read", None)


def answer_text(content: object) -> str | None:
    """The text of the answer's text blocks, or None when the content is not of the API's shape:
    the SDK builds a message without validating it, so a block may be anything the body held."""
    if not isinstance(content, list):
        return None
    parts: list[str] = []
    for block in content:
        kind = getattr(block, "type", None)
        if not isinstance(kind, str):
            return None
        if kind == "text":
            text = getattr(block, "text", None)
            if not isinstance(text, str):
                return None
            parts.append(text)
    return "".join(parts)


def status_kind(status: int) -> str:
    return {
        529: "overloaded",
        500: "server_error",
        401: "authentication_error",
        403: "permission_error",
        400: "bad_request",
        404: "not_found",
    }.get(status, f"http_{status}")


#: a 404 whose error says the requested model is not served (retired, or not a model id)
MODEL_NOT_FOUND = "model_not_found"


def status_kind_of(exc: anthropic.APIStatusError) -> str:
    """The kind of a status error; a 404 ``not_found_error`` whose message names a model
    (``model: claude-sonnet-4-5``, as the API says of a retired one) is ``model_not_found``."""
    body = exc.body
    error = body.get("error") if isinstance(body, dict) else None
    kind = error.get("type") if isinstance(error, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    if (
        exc.status_code == 404
        and kind == "not_found_error"
        and isinstance(message, str)
        and message.startswith("model:")
    ):
        return MODEL_NOT_FOUND
    return status_kind(exc.status_code)


def status_detail(exc: anthropic.APIStatusError) -> str:
    return f"HTTP {exc.status_code}: {exc.message}"[:300]


def retry_after(exc: anthropic.APIStatusError) -> float | None:
    headers = exc.response.headers
    raw_ms = headers.get("retry-after-ms")
    raw = headers.get("retry-after")
    try:
        if raw_ms is not None:
            return float(raw_ms) / 1000.0
        if raw is not None:
            return float(raw)
    except ValueError:
        return None  # an HTTP date: treat as "no hint" and back off as usual
    return None
