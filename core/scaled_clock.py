"""``ScaledClock``: simulated time that runs faster than real time (the simulator's daemon)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator


class ScaledClock:
    """Simulated time that starts at ``epoch_ms`` and runs ``speed`` times faster than real time,
    except while held (``hold``): then it stands still, and sleepers wake that much later."""

    def __init__(self, epoch_ms: int, speed: float) -> None:
        if speed <= 0:
            raise ValueError(f"speed must be > 0, got {speed!r}")
        self.epoch_ms = epoch_ms
        self.speed = speed
        self._real_start_secs = time.monotonic()
        self._holds = 0  # nested holds in force
        self._held_since = 0.0  # real reading when the current hold began
        self._held_secs = 0.0  # real seconds spent held before the current hold
        self._hold_count = 0  # holds begun so far: a sleeper knows whether time stood still
        self._released: asyncio.Event | None = None  # set when the current hold ends

    def now_ms(self) -> int:
        return self.epoch_ms + int(self.monotonic_secs() * 1000.0)

    def monotonic_secs(self) -> float:
        real = self._held_since if self._holds else time.monotonic()
        return (real - self._real_start_secs - self._held_secs) * self.speed

    async def sleep(self, secs: float) -> None:
        secs = max(0.0, secs)
        deadline = self.monotonic_secs() + secs
        holds = self._hold_count
        await asyncio.sleep(secs / self.speed)
        if self._hold_count == holds and not self._holds:
            return  # time ran all along (the usual case)
        while True:  # time stood still for a while: sleep the rest once it runs again
            if self._released is not None:
                await self._released.wait()
                continue
            remaining = deadline - self.monotonic_secs()
            if remaining <= 0:
                return
            await asyncio.sleep(remaining / self.speed)

    @property
    def held(self) -> bool:
        return self._holds > 0

    @contextlib.contextmanager
    def hold(self) -> Iterator[None]:
        """Stop time inside the block (nestable; it runs again when the last hold ends)."""
        if self._holds == 0:
            self._held_since = time.monotonic()
            self._hold_count += 1
            self._released = asyncio.Event()
        self._holds += 1
        try:
            yield
        finally:
            self._holds -= 1
            if self._holds == 0:
                self._held_secs += time.monotonic() - self._held_since
                released, self._released = self._released, None
                if released is not None:
                    released.set()
