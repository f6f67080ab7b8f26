"""Secrets out of text: model-written notes, log lines, anything that may be stored or re-sent.

Two kinds of match. Shapes: an Anthropic or OpenAI-style key (``sk-ant-...``, ``sk-...``), a
``Bearer`` token, an AWS access key id (``AKIA...``), and long runs of hex (>= 32) or base64
(>= 32, with upper and lower case letters and digits) that look like key material rather than words. Values: any
configured secret (the Anthropic key, Binance keys) wherever it appears, whatever its shape.

Each match becomes ``[REDACTED:<kind>]``. Cheap enough for every log record; no state.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Final

_SHAPES: Final = (
    ("bearer", re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/\-]{8,}=*")),
    # a credential header or setting printed with its value (debug logs of request options)
    (
        "credential",
        re.compile(
            r"(?i)(?P<keep>(?:x-api-key|authorization|api[-_]key|api[-_]secret|password)"
            r"['\"]?[:=] ?['\"]?)[^'\"\s,}]{4,}"
        ),
    ),
    ("anthropic_key", re.compile(r"sk-ant-[A-Za-z0-9_\-]{6,}")),
    ("api_key", re.compile(r"\bsk-[A-Za-z0-9_\-]{16,}")),
    ("aws_key_id", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("hex_secret", re.compile(r"\b[0-9a-fA-F]{32,}\b")),
    # base64 runs: only with an upper, a lower case letter and a digit, so words, numbers and
    # file paths (their "-" and "_" break the run) are kept
    (
        "secret",
        re.compile(
            r"(?<![A-Za-z0-9+/])(?=[A-Za-z0-9+/]*\d)(?=[A-Za-z0-9+/]*[a-z])(?=[A-Za-z0-9+/]*[A-Z])"
            r"[A-Za-z0-9+/]{32,}={0,2}"
        ),
    ),
)
#: a configured secret shorter than this is not searched for (it would redact ordinary words)
MIN_SECRET_CHARS: Final = 8


def _marker(kind: str) -> Callable[[re.Match[str]], str]:
    def replace(match: re.Match[str]) -> str:
        return (match.groupdict().get("keep") or "") + f"[REDACTED:{kind}]"

    return replace


class Redactor:
    """Replaces secret-shaped text and the configured ``secrets`` by ``[REDACTED:<kind>]``."""

    def __init__(self, secrets: Iterable[str | None] = ()) -> None:
        values = sorted(
            {s for s in secrets if s and len(s) >= MIN_SECRET_CHARS}, key=len, reverse=True
        )
        self._values = re.compile("|".join(map(re.escape, values))) if values else None

    def redact(self, text: str) -> tuple[str, int]:
        """``text`` without secrets, and how many were taken out."""
        count = 0
        if self._values is not None:
            text, n = self._values.subn("[REDACTED:configured_secret]", text)
            count += n
        for kind, pattern in _SHAPES:
            text, n = pattern.subn(_marker(kind), text)
            count += n
        return text, count

    def __call__(self, text: str) -> str:
        return self.redact(text)[0]


__all__ = ["MIN_SECRET_CHARS", "Redactor"]
