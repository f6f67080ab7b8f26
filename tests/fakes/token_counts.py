"""Token counts and prompt caching as the Messages API bills them, for the fake server.

Tokens are estimated at 4 characters each (the real tokenizer is not public; the ratio is what
matters when comparing two prompt layouts). Caching follows the API's rule: the prefix up to a
block carrying ``cache_control`` is written to the cache on first sight and read from it when the
same prefix comes again; everything after the last breakpoint is plain input.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

import orjson


def _blocks(body: dict[str, Any]) -> list[dict[str, Any]]:
    system = body.get("system") or []
    if isinstance(system, str):
        system = [{"type": "text", "text": system}]
    out = list(system)
    for message in body.get("messages", []):
        content = message["content"]
        out.extend([{"type": "text", "text": content}] if isinstance(content, str) else content)
    return out


def tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


class CacheCounter:
    """``usage_for(body)``: the ``usage`` the real API would bill for this request body."""

    def __init__(self) -> None:
        self._cached: set[str] = set()

    def usage_for(self, body: dict[str, Any]) -> dict[str, Any]:
        blocks = _blocks(body)
        counts = [tokens(b.get("text", "")) for b in blocks]
        tools = tokens(orjson.dumps(body.get("output_config", {})).decode())
        breakpoints = [i for i, b in enumerate(blocks) if b.get("cache_control")]
        read = write = 0
        covered = -1
        prefix = hashlib.sha256()
        for i, block in enumerate(blocks):
            prefix.update(orjson.dumps(block, option=orjson.OPT_SORT_KEYS))
            if i in breakpoints:
                key = prefix.hexdigest()
                size = sum(counts[covered + 1 : i + 1])
                if key in self._cached:
                    read += size
                else:
                    write += size
                    self._cached.add(key)
                covered = i
        plain = sum(counts[covered + 1 :]) + tools
        return {
            "input_tokens": plain,
            "output_tokens": 300,
            "cache_creation_input_tokens": write,
            "cache_read_input_tokens": read,
            "service_tier": "standard",
        }
