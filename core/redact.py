"""Secrets out of text: model-written notes, log lines, anything that may be stored or re-sent.

Two kinds of match. Shapes: an Anthropic or OpenAI-style key (``sk-ant-...``, ``sk-...``), a
``Bearer`` token, an AWS access key id (``AKIA...``), and long runs of hex (>= 32) or base64
(>= 32, with upper and lower case letters and digits) that look like key material rather than words
or file paths. Values: any configured secret (the Anthropic key, Binance keys) wherever it appears,
whatever its shape.

Each match becomes ``[REDACTED:<kind>]``. Cheap enough for every log record; no state.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Final


def _not_a_path(run: str) -> bool:
    """A base64 run with "/" is key material when its parts that are not word-shaped hold at
    least ``_KEY_PART_CHARS`` characters.

    "/" is a base64 character, so a path of folders and names (``run_fold0/state/runs/
    20261128T171408Z``) reads as one long run. But a path's parts are words, capitalised words,
    numbers and timestamps, with now and then a short random name (``mktemp``'s ``UjgjrVqDO1``),
    where a random key's parts are almost all of mixed case and digits.
    """
    if "/" not in run:
        return True
    parts = run.split("/")
    return sum(len(part) for part in parts if not _PATH_PART.fullmatch(part)) >= _KEY_PART_CHARS


_PATH_PART: Final = re.compile(r"[A-Z]?[a-z0-9]*|[A-Z0-9]*")
#: measured on random keys with a "/" (and a digit and both cases): of 9,349 of 40 characters,
#: none has fewer; of 7,798 of 32 characters (the shortest run redacted), 3
_KEY_PART_CHARS: Final = 16


def _always(_run: str) -> bool:
    return True


_SHAPES: Final[tuple[tuple[str, re.Pattern[str], Callable[[str], bool]], ...]] = (
    ("bearer", re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/\-]{8,}=*"), _always),
    # a credential header or setting printed with its value (debug logs of request options)
    (
        "credential",
        re.compile(
            r"(?i)(?P<keep>(?:x-api-key|authorization|api[-_]key|api[-_]secret|password)"
            r"['\"]?[:=] ?['\"]?)[^'\"\s,}]{4,}"
        ),
        _always,
    ),
    ("anthropic_key", re.compile(r"sk-ant-[A-Za-z0-9_\-]{6,}"), _always),
    ("api_key", re.compile(r"\bsk-[A-Za-z0-9_\-]{16,}"), _always),
    ("aws_key_id", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), _always),
    ("hex_secret", re.compile(r"\b[0-9a-fA-F]{32,}\b"), _always),
    # base64 runs: only with an upper, a lower case letter and a digit, so words and numbers are
    # kept, and file paths ("/" is base64 too) by _not_a_path
    (
        "secret",
        re.compile(
            r"(?<![A-Za-z0-9+/])(?=[A-Za-z0-9+/]*\d)(?=[A-Za-z0-9+/]*[a-z])(?=[A-Za-z0-9+/]*[A-Z])"
            r"[A-Za-z0-9+/]{32,}={0,2}"
        ),
        _not_a_path,
    ),
)

#: a configured secret shorter than this is not searched for (it would redact ordinary words)
MIN_SECRET_CHARS: Final = 8


def _redact_shape(
    kind: str, pattern: re.Pattern[str], is_secret: Callable[[str], bool], text: str
) -> tuple[str, int]:
    count = 0

    def replace(match: re.Match[str]) -> str:
        nonlocal count
        if not is_secret(match.group()):
            return match.group()
        count += 1
        return (match.groupdict().get("keep") or "") + f"[REDACTED:{kind}]"

    return pattern.sub(replace, text), count


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
        for kind, pattern, is_secret in _SHAPES:
            text, n = _redact_shape(kind, pattern, is_secret, text)
            count += n
        return text, count

    def __call__(self, text: str) -> str:
        return self.redact(text)[0]


__all__ = ["MIN_SECRET_CHARS", "Redactor"]
