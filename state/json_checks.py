"""Text vigil stores must be UTF-8: what ``json.loads`` (or a command line) hands over but a file
vigil writes back cannot hold."""

from __future__ import annotations

import json


def first_unencodable(text: str) -> tuple[int, str] | None:
    """Where ``text`` first holds what UTF-8 cannot encode (a lone surrogate: an escaped half of a
    pair, or a byte Python's ``surrogateescape`` stood in for), and that run; None: it can."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return exc.start, text[exc.start : exc.end]
    return None


def lone_surrogate(text: str | bytes, raw: object) -> str | None:
    """The first lone surrogate in ``raw`` (parsed from ``text``), as its repr; None without one.

    json reads an escaped half of a surrogate pair (``"\\ud800"``) as a str UTF-8 cannot encode:
    a file holding one loads, and then every save of what it held fails. Only a ``\\ud`` escape
    makes one (the text itself was decoded from UTF-8), so ``raw`` is dumped only then.
    """
    if isinstance(text, str):
        escaped = "\\ud" in text or "\\uD" in text
    else:
        escaped = b"\\ud" in text or b"\\uD" in text
    if not escaped:
        return None
    found = first_unencodable(json.dumps(raw, ensure_ascii=False))
    return None if found is None else repr(found[1])
