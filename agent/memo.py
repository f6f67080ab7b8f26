"""Small bounded memos for the decision path: the oldest entry goes first once one is full.

``IdentityMemo`` answers for the very object it was given (``market.closes`` hands every decision
between two candle closes the same tuple), and holds that object, so its ``id`` cannot be reused
by another while the entry lives.
"""

from __future__ import annotations

from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


def remember(memo: dict[K, V], key: K, value: V, size: int) -> None:
    """Store ``key``, dropping the oldest entry when ``memo`` holds ``size`` already."""
    if len(memo) >= size:
        del memo[next(iter(memo))]
    memo[key] = value


class IdentityMemo(Generic[K, V]):
    def __init__(self, size: int) -> None:
        self._size = size
        self._entries: dict[int, tuple[K, V]] = {}

    def get(self, key: K) -> V | None:
        """The value stored for this very object, or None."""
        entry = self._entries.get(id(key))
        return entry[1] if entry is not None and entry[0] is key else None

    def put(self, key: K, value: V) -> None:
        remember(self._entries, id(key), (key, value), self._size)


__all__ = ["IdentityMemo", "remember"]
