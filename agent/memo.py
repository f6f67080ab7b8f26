"""Small bounded memos for the decision path: the oldest entry goes first once one is full.

``IdentityMemo`` answers for the very object it was given (``market.closes`` hands every decision
between two candle closes the same tuple), and holds that object, so its ``id`` cannot be reused
by another while the entry lives. ``FloatMemo`` remembers a function of one float by value (most
of a snapshot's floats were in the one before).
"""

from __future__ import annotations

from collections.abc import Callable
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


class FloatMemo(Generic[V]):
    """``of(value)`` is ``compute(value)``, remembered by value for up to ``size`` floats.

    Zeros are left out: 0.0 == -0.0, so they would share an entry, and their signs must not mix.
    Emptied when full: simpler and cheaper than dropping the oldest entry one at a time. ``of`` is
    a plain function (the walks call it once per float)."""

    def __init__(self, compute: Callable[[float], V], size: int) -> None:
        self.size = size
        self.entries: dict[float, V] = {}
        entries = self.entries

        def of(value: float) -> V:
            found = entries.get(value)
            if found is None:
                found = compute(value)
                if value:
                    if len(entries) >= size:
                        entries.clear()
                    entries[value] = found
            return found

        self.of = of


__all__ = ["FloatMemo", "IdentityMemo", "remember"]
