"""Answers computed once and served many times: what keeps 50 dashboards off the daemon's loop.

The API runs on the daemon's own event loop, so every millisecond a route computes is a
millisecond a decision or a tick waits. Most of what the API answers changes rarely compared with
how often a greedy client asks: the journal gets a line per decision or review, trades.csv a row
per fill, and the live figures (loops, streams, equity) are read by people, for whom a second old
is fresh. So an answer is kept as the bytes sent, and computed again only when

- its *version* changed: a cheap look at what it is made of (``file_version``: a ``stat`` of the
  journal and of its folder), so a new decision is visible to the very next request, and
- or it is older than its *max age* (live daemon figures that have no version to look at).

Concurrent requests for an answer being computed wait for that one computation (single flight),
so a burst of clients costs one computation, not fifty. Keys are bounded (least recently used go),
since query parameters make them. Ages are real (monotonic) seconds: they bound how often the
loop does the work, which is a real-time cost, whatever the daemon's clock (60x against the
simulator) says.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from pathlib import Path

DEFAULT_MAX_KEYS = 64


@dataclass(frozen=True)
class _Entry:
    version: Hashable
    at_secs: float
    body: bytes


def file_version(*paths: Path) -> tuple[tuple[int, int, int] | None, ...]:
    """Inode, size and mtime of each path (None: missing). A journal's line, its rotation (a new
    inode, a changed folder) and a retention sweep (a changed folder) all change it."""
    versions: list[tuple[int, int, int] | None] = []
    for path in paths:
        try:
            st = path.stat()
        except OSError:
            versions.append(None)
            continue
        versions.append((st.st_ino, st.st_size, st.st_mtime_ns))
    return tuple(versions)


class ResponseCache:
    def __init__(
        self,
        max_keys: int = DEFAULT_MAX_KEYS,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._entries: OrderedDict[Hashable, _Entry] = OrderedDict()
        self._computing: dict[tuple[Hashable, Hashable], asyncio.Task[bytes]] = {}
        self._max_keys = max_keys
        self._monotonic = monotonic
        self.hits = 0
        self.computed = 0

    async def get(
        self,
        key: Hashable,
        compute: Callable[[], Awaitable[bytes]],
        *,
        version: Hashable = None,
        max_age_secs: float | None = None,
    ) -> bytes:
        """The kept answer for ``key`` if its version is ``version`` and it is younger than
        ``max_age_secs`` (None: no age limit); else ``compute()``'s, kept. A failed computation
        is raised to every waiter and nothing is kept."""
        entry = self._entries.get(key)
        if entry is not None and entry.version == version and self._young(entry, max_age_secs):
            self._entries.move_to_end(key)
            self.hits += 1
            return entry.body
        # a computation of an older version may miss what this request must see: not joined
        running = self._computing.get((key, version))
        if running is None:
            # its own task: a client that hangs up must not cancel the answer others wait for
            running = asyncio.create_task(self._compute(key, compute, version))
            self._computing[(key, version)] = running
        else:
            self.hits += 1
        return await asyncio.shield(running)

    async def _compute(
        self, key: Hashable, compute: Callable[[], Awaitable[bytes]], version: Hashable
    ) -> bytes:
        started = self._monotonic()
        try:
            body = await compute()
        finally:
            del self._computing[(key, version)]
        self.computed += 1
        self._keep(key, _Entry(version, started, body))
        return body

    def _young(self, entry: _Entry, max_age_secs: float | None) -> bool:
        return max_age_secs is None or self._monotonic() - entry.at_secs < max_age_secs

    def _keep(self, key: Hashable, entry: _Entry) -> None:
        self._entries[key] = entry
        self._entries.move_to_end(key)
        while len(self._entries) > self._max_keys:
            self._entries.popitem(last=False)


__all__ = ["ResponseCache", "file_version"]
