"""``ScaledClock``: simulated time that runs faster than real time (the simulator's daemon)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Iterator

#: how early a wake may come and still be on time: asyncio fires a timer up to its clock's
#: resolution early, and the real -> simulated arithmetic rounds; sleeping again for that would
#: let a sleeper with a later deadline, due in the same loop turn, wake first
_ON_TIME_REAL_SECS = 1e-6


class ScaledClock:
    """Simulated time that starts at ``epoch_ms`` and runs ``speed`` times faster than real time,
    except while held (``hold``): then it stands still, and sleepers wake that much later.

    While ``absorb_stalls`` runs, a process stall is not counted either: of any real interval
    between two readings of the clock, at most ``cap_secs`` counts. The simulated market then
    waits for a process that was not running (a busy core, a slow fsync, a laptop's sleep), as a
    replay's clock does, instead of sending in one burst everything that fell due meanwhile."""

    def __init__(
        self, epoch_ms: int, speed: float, *, real_secs: Callable[[], float] = time.monotonic
    ) -> None:
        if speed <= 0:
            raise ValueError(f"speed must be > 0, got {speed!r}")
        self.epoch_ms = epoch_ms
        self.speed = speed
        # readings may come from a logging thread too: one step is counted once
        self._lock = threading.Lock()
        self._real_secs = real_secs
        self._real_start_secs = self._last_real_secs = real_secs()
        self._uncounted_secs = 0.0  # real seconds held or stalled
        self._stall_cap_secs: float | None = None  # set while absorb_stalls runs
        self._holds = 0  # nested holds in force
        self._released: asyncio.Event | None = None  # set when the current hold ends
        self.stalls = 0  # real intervals longer than the cap, since the start
        self.stalled_secs = 0.0  # real seconds of them not counted

    def now_ms(self) -> int:
        return self.epoch_ms + int(self.monotonic_secs() * 1000.0)

    def monotonic_secs(self) -> float:
        return self._counted_real_secs() * self.speed

    def _counted_real_secs(self) -> float:
        """Real seconds since the start that count: every reading counts the step since the
        previous one, unless held (none of it) or longer than the stall cap (the cap)."""
        with self._lock:
            real = self._real_secs()
            step = real - self._last_real_secs
            self._last_real_secs = real
            cap = self._stall_cap_secs
            if self._holds:
                self._uncounted_secs += step
            elif cap is not None and step > cap:
                self._uncounted_secs += step - cap
                self.stalls += 1
                self.stalled_secs += step - cap
            return real - self._real_start_secs - self._uncounted_secs

    async def sleep(self, secs: float) -> None:
        secs = max(0.0, secs)
        deadline = self.monotonic_secs() + secs
        await asyncio.sleep(secs / self.speed)
        while True:  # time stood still or skipped a stall meanwhile: sleep the rest
            if self._released is not None:
                await self._released.wait()
                continue
            remaining = deadline - self.monotonic_secs()
            if remaining <= _ON_TIME_REAL_SECS * self.speed:
                return
            await asyncio.sleep(remaining / self.speed)

    @property
    def stall_cap_secs(self) -> float | None:
        """The most of a gap between readings that counts, while ``absorb_stalls`` runs."""
        return self._stall_cap_secs

    @property
    def held(self) -> bool:
        return self._holds > 0

    @contextlib.contextmanager
    def hold(self) -> Iterator[None]:
        """Stop time inside the block (nestable; it runs again when the last hold ends)."""
        if self._holds == 0:
            self._counted_real_secs()  # what ran until now counts
            self._released = asyncio.Event()
        self._holds += 1
        try:
            yield
        finally:
            if self._holds == 1:
                self._counted_real_secs()  # the held stretch does not
            self._holds -= 1
            if self._holds == 0:
                released, self._released = self._released, None
                if released is not None:
                    released.set()

    async def absorb_stalls(self, cap_secs: float = 0.05, tick_secs: float = 0.01) -> None:
        """Until cancelled, count at most ``cap_secs`` of any real interval between readings.

        Reads the clock every ``tick_secs`` so that an idle event loop is not taken for a
        stalled one: a longer gap between readings means the loop did not run."""
        if not 0 < tick_secs < cap_secs:
            raise ValueError(f"need 0 < tick_secs < cap_secs, got {tick_secs!r}, {cap_secs!r}")
        self._counted_real_secs()  # the time before the watch counts as it did
        self._stall_cap_secs = cap_secs
        try:
            while True:
                await asyncio.sleep(tick_secs)  # real time: the reading is the point
                self._counted_real_secs()
        finally:
            self._counted_real_secs()
            self._stall_cap_secs = None
