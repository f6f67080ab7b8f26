"""Cutting the agent's memory notes down to size without leaving half a sentence or half a word."""

from __future__ import annotations

AGENT_MEMORY_MAX_CHARS = 500

_SENTENCE_ENDS = frozenset(".!?…")
#: may follow a sentence end and still belong to it: `He said "stop." Then...`
_SENTENCE_CLOSERS = frozenset("\"')]}\u2019\u201d")  # also right single/double curly quotes


def clip_memory(text: str, limit: int = AGENT_MEMORY_MAX_CHARS) -> str:
    """The longest prefix of ``text`` of at most ``limit`` characters that ends cleanly.

    Text that fits is returned unchanged. Otherwise the cut is at the last sentence end that fits
    (``.``, ``!``, ``?`` or ``…``, optionally followed by closing quotes or brackets, then whitespace;
    a line break also ends a note); if not even one sentence fits, at the last word boundary; if a
    single word is longer than ``limit``, the result is empty rather than half a word. Trailing
    whitespace is dropped. The result is always a prefix of ``text``.
    """
    if limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    if len(text) <= limit:
        return text
    sentence_end = _last_sentence_end(text, limit)
    if sentence_end > 0:
        return text[:sentence_end].rstrip()
    return text[: _last_word_end(text, limit)].rstrip()


def _last_sentence_end(text: str, limit: int) -> int:
    """Largest ``end <= limit`` such that ``text[:end]`` is whole sentences or lines, or 0."""
    # text[limit] exists because len(text) > limit; a boundary needs whitespace right after it
    for end in range(limit, 0, -1):
        if not text[end].isspace():
            continue
        if text[end] == "\n" and not text[:end].isspace():
            return end
        last = end - 1
        while last >= 0 and text[last] in _SENTENCE_CLOSERS:
            last -= 1
        if last >= 0 and text[last] in _SENTENCE_ENDS:
            return end
    return 0


def _last_word_end(text: str, limit: int) -> int:
    """Largest ``end <= limit`` with whitespace at ``text[end]`` and a word before it, or 0."""
    for end in range(limit, 0, -1):
        if text[end].isspace() and not text[end - 1].isspace():
            return end
    return 0
