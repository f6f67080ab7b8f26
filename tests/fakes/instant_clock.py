"""A Clock whose ``sleep`` returns at once after moving time forward: retries and backoff in tests
run instantly and deterministically, and the test can read how long the code *would* have waited."""

from __future__ import annotations

import asyncio


class InstantClock:
    def __init__(self, epoch_ms: int = 0) -> None:
        self._epoch_ms = epoch_ms
        self._now_secs = 0.0
        self.slept_secs: list[float] = []

    def now_ms(self) -> int:
        return self._epoch_ms + round(self._now_secs * 1000.0)

    def monotonic_secs(self) -> float:
        return self._now_secs

    async def sleep(self, secs: float) -> None:
        self.slept_secs.append(secs)
        self._now_secs += max(0.0, secs)
        await asyncio.sleep(0)

    def advance(self, secs: float) -> None:
        self._now_secs += secs
