"""A Clock that stands at one instant: for code that must read the time but never wait on it."""

from __future__ import annotations


class FixedClock:
    def __init__(self, now_ms: int) -> None:
        self._now_ms = now_ms

    def now_ms(self) -> int:
        return self._now_ms

    def monotonic_secs(self) -> float:
        return 0.0

    async def sleep(self, secs: float) -> None:
        raise AssertionError(f"slept {secs} s on a clock that must not be waited on")
