"""What ``json.loads`` accepts but a file vigil reads and writes back must not hold."""

from __future__ import annotations

import json


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
    try:
        json.dumps(raw, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        return repr(exc.object[exc.start : exc.end])
    return None
