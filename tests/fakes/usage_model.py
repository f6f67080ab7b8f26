"""Realistic usage blocks for the fake Messages API: tokens counted from the request the SDK sent,
prompt-cache reads and writes as the real API reports them.

Token count: ``ceil(chars / CHARS_PER_TOKEN)`` of the serialized parts the model reads. Anthropic's
own rule of thumb is "about 3.5 English characters per token"; JSON with many digits tokenizes no
better, so 3.5 (not the looser 4) keeps the cost figures on the high side. No tokenizer is
downloaded: the figure is an approximation, stated as one wherever it is printed.

What counts as input, in the API's cache order: ``output_config`` (the structured-output schema,
static, placed first like ``tools``), then each ``system`` block, then each message content block.

Caching, as documented for the Messages API:
- a block with ``cache_control`` is a breakpoint; the prefix up to and including it is cacheable
  when it has at least the model's minimum cacheable length (shorter: silently not cached);
- a request reads the longest prefix (at one of its breakpoints) still alive in the cache, and
  writes the prefix up to its last breakpoint when that is longer than what it read;
- an entry lives 5 minutes (``"ttl": "1h"``: one hour) from its last read or write;
- ``input_tokens`` is what is neither read nor written.
Time comes from ``now_ms`` (the replay's virtual clock in the cost benchmark), so TTLs expire on
the same clock as the market data.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

CHARS_PER_TOKEN = 3.5
DEFAULT_TTL_MS = 5 * 60_000
ONE_HOUR_MS = 60 * 60_000
#: minimum cacheable prompt length per model family (Anthropic's prompt caching docs, 2025-11)
MIN_CACHEABLE_TOKENS = {"haiku-4": 4096, "opus-4-5": 4096, "opus-4-6": 4096, "haiku-3": 2048}
DEFAULT_MIN_CACHEABLE = 1024  # Sonnet 4.x, Opus 4 / 4.1


def count_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN) if text else 0


def min_cacheable_tokens(model: str) -> int:
    for family, minimum in MIN_CACHEABLE_TOKENS.items():
        if family in model:
            return minimum
    return DEFAULT_MIN_CACHEABLE


def _dumps(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


@dataclass(frozen=True)
class _Block:
    tokens: int
    key: str  # what the block holds, for the prefix hash
    ttl_ms: int | None  # a breakpoint (with its TTL) or None


def _blocks(body: dict[str, Any]) -> list[_Block]:
    blocks: list[_Block] = []
    if body.get("output_config"):
        text = _dumps(body["output_config"])
        blocks.append(_Block(count_tokens(text), text, None))
    system = body.get("system") or []
    if isinstance(system, str):
        system = [{"type": "text", "text": system}]
    contents: list[dict[str, Any]] = list(system)
    for message in body.get("messages") or []:
        content = message.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        contents.extend(content or [])
    for block in contents:
        text = str(block.get("text", "")) if block.get("type") == "text" else _dumps(block)
        control = block.get("cache_control")
        ttl = None
        if isinstance(control, dict):
            ttl = ONE_HOUR_MS if control.get("ttl") == "1h" else DEFAULT_TTL_MS
        blocks.append(_Block(count_tokens(text) + 4, text, ttl))  # ~4 tokens of block framing
    return blocks


@dataclass
class PromptCache:
    """The server-side cache: prefix hash -> expiry (ms on ``now_ms``)."""

    now_ms: Callable[[], int]
    entries: dict[str, int] = field(default_factory=dict)

    def usage(self, body: dict[str, Any], output_text: str) -> dict[str, Any]:
        model = str(body.get("model", ""))
        now = self.now_ms()
        blocks = _blocks(body)
        total = sum(b.tokens for b in blocks)
        minimum = min_cacheable_tokens(model)
        digest = hashlib.sha256(model.encode())
        prefixes: list[tuple[int, str, int]] = []  # (tokens, hash, ttl) at each breakpoint
        running = 0
        for block in blocks:
            digest.update(block.key.encode())
            running += block.tokens
            if block.ttl_ms is not None and running >= minimum:
                prefixes.append((running, digest.hexdigest(), block.ttl_ms))
        read = 0
        for tokens, key, ttl in reversed(prefixes):
            if self.entries.get(key, -1) > now:
                read = tokens
                self.entries[key] = now + ttl  # a hit refreshes the entry's life
                break
        written_5m = written_1h = 0
        if prefixes and prefixes[-1][0] > read:
            tokens, key, ttl = prefixes[-1]
            self.entries[key] = now + ttl
            if ttl == ONE_HOUR_MS:
                written_1h = tokens - read
            else:
                written_5m = tokens - read
        written = written_5m + written_1h
        return {
            "input_tokens": total - read - written,
            "output_tokens": count_tokens(output_text),
            "cache_creation_input_tokens": written,
            "cache_read_input_tokens": read,
            "cache_creation": {
                "ephemeral_5m_input_tokens": written_5m,
                "ephemeral_1h_input_tokens": written_1h,
            },
            "service_tier": "standard",
        }
