"""The prompt's budget arithmetic: items, a deterministic trimming order, protected items.

Every piece of non-snapshot context is an ``Item`` with a drop rank; the trimmer drops the lowest
rank first until the texts fit the budget, and never drops a protected item (caps, banned tickers):
if the protected items alone exceed the budget, it keeps them all and says ``over_budget``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from state.memory_clip import clip_memory

SEPARATOR_CHARS = 1  # items are joined by a newline


@dataclass(frozen=True)
class Item:
    part: str  # the prompt part it belongs to: policy, memory, session
    key: str  # stable name, as the journal reports a trim
    text: str
    protected: bool = False
    #: lower goes first; (class, score or time, key) so ties break the same way every time
    drop_rank: tuple[float, float, str] = (0.0, 0.0, "")


@dataclass(frozen=True)
class Trimmed:
    kept: tuple[Item, ...]
    dropped: tuple[Item, ...]
    over_budget: bool

    @property
    def chars(self) -> int:
        return size(self.kept)


def size(items: Sequence[Item]) -> int:
    return sum(len(item.text) + SEPARATOR_CHARS for item in items)


def cap_item(item: Item, max_chars: int) -> tuple[Item, bool]:
    """The item cut to ``max_chars`` at a sentence boundary (protected items are never cut)."""
    if item.protected or len(item.text) <= max_chars:
        return item, False
    cut = clip_memory(item.text, max_chars) or item.text[:max_chars]
    return Item(item.part, item.key, cut, item.protected, item.drop_rank), True


def trim(items: Sequence[Item], budget_chars: int) -> Trimmed:
    """Drop unprotected items, lowest ``drop_rank`` first, until ``size(kept) <= budget_chars``."""
    total = size(items)
    dropped: set[int] = set()
    order = sorted(
        (i for i, item in enumerate(items) if not item.protected),
        key=lambda i: (items[i].drop_rank, i),
    )
    for index in order:
        if total <= budget_chars:
            break
        dropped.add(index)
        total -= len(items[index].text) + SEPARATOR_CHARS
    kept = tuple(item for i, item in enumerate(items) if i not in dropped)
    gone = tuple(items[i] for i in sorted(dropped, key=lambda i: (items[i].drop_rank, i)))
    return Trimmed(kept=kept, dropped=gone, over_budget=total > budget_chars)
