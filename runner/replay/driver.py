"""Drives a VirtualClock through a replay: wake the next sleepers, wait until the daemon is quiet,
repeat, so every run of the same inputs takes the same path.

Quiet means the event loop has nothing ready to run and no busy probe says otherwise. The probes
cover work that waits on something other than the loop: a Claude call in flight (decision routine,
position tracker) and queued bus handlers. Regime fits run inline in replay, so nothing waits on a
thread. Only then does time move: a tick, a timer or a candle close never overtakes the work an
earlier instant started, which is what makes the journals byte-identical from run to run.

Without pacing, an instant at which only idle periodic checks would wake (the watchdog's between
ticks; the position tracker's while nothing is tracked, agent cycles aside) is passed over inside
the clock (``VirtualClock.release_next``): same run, fewer loop turns.

The driver paces nothing by default (as fast as the machine allows); with ``speed`` it keeps
simulated time at most ``speed`` times ahead of real time. It is the clock's driver, not domain
code, so it reads the wall clock for pacing and progress.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence, Sized
from dataclasses import dataclass

from core.clock import VirtualClock

log = logging.getLogger(__name__)

#: real seconds to wait when only a busy probe (network in flight) keeps the daemon from quiet
BUSY_POLL_SECS = 0.001


@dataclass(frozen=True)
class DriveResult:
    steps: int  # instants released (their sleepers woken)
    reached_ms: int  # the clock's time when the drive stopped
    finished: bool  # True: reached end_ms; False: nothing left asleep before it


def _ready_queue(loop: asyncio.AbstractEventLoop) -> Sized:
    # CPython's event loops keep the callbacks due on the next turn in ``_ready``; no public API
    # says "nothing is runnable", and replay's determinism rests on knowing exactly that.
    ready = getattr(loop, "_ready", None)
    if not isinstance(ready, Sized):
        raise RuntimeError(f"replay needs CPython's asyncio event loop, not {type(loop).__name__}")
    return ready


class ReplayDriver:
    def __init__(
        self,
        clock: VirtualClock,
        end_ms: int,
        *,
        busy: Sequence[Callable[[], bool]] = (),
        on_step: Callable[[int], None] | None = None,
        speed: float | None = None,
        wall_secs: Callable[[], float] = time.monotonic,
        pass_idle: bool = True,
    ) -> None:
        """``pass_idle``: pass over instants at which only idle periodic checks are due (never
        while pacing: pacing reads every instant)."""
        if speed is not None and speed <= 0:
            raise ValueError(f"speed must be > 0 (or None for as fast as possible), got {speed}")
        self._clock = clock
        self._end_ms = end_ms
        self._busy = tuple(busy)
        self.on_step = on_step
        self._speed = speed
        self._wall_secs = wall_secs
        self._pass_idle = pass_idle and speed is None
        self.steps = 0

    async def settle(self) -> None:
        """Return once nothing is runnable and every busy probe is quiet."""
        ready = _ready_queue(asyncio.get_running_loop())
        while True:
            await asyncio.sleep(0)
            if len(ready):
                continue
            if any(probe() for probe in self._busy):
                await asyncio.sleep(BUSY_POLL_SECS)
                continue
            return

    async def run(self) -> DriveResult:
        """Advance until the next wake-up is at or after ``end_ms`` (or nobody sleeps)."""
        if self._speed is not None:
            return await self._run_paced()
        loop = asyncio.get_running_loop()
        done: asyncio.Future[DriveResult] = loop.create_future()
        _Turns(self, loop, done).start()
        return await done

    async def _run_paced(self) -> DriveResult:
        clock = self._clock
        start_virtual = clock.monotonic_secs()
        start_wall = self._wall_secs()
        while True:
            await self.settle()
            deadline = clock.next_deadline_secs()
            if deadline is not None and clock.ms_at(deadline) < self._end_ms:
                await self._pace(deadline - start_virtual, start_wall)
            result = self._release_next()
            if result is not None:
                return result

    def _release_next(self) -> DriveResult | None:
        """With the daemon quiet: the result if the drive is over, else release the next
        instant (None)."""
        clock = self._clock
        deadline = clock.next_deadline_secs()
        if deadline is None:
            log.error("replay: nothing is waiting on the clock before the end; stopping")
            return DriveResult(self.steps, clock.now_ms(), finished=False)
        if clock.ms_at(deadline) >= self._end_ms:
            return DriveResult(self.steps, clock.now_ms(), finished=True)
        released = clock.released
        clock.release_next(until_ms=self._end_ms if self._pass_idle else None)
        self.steps += clock.released - released
        if self.on_step is not None:
            self.on_step(clock.now_ms())
        return None

    async def _pace(self, virtual_elapsed_secs: float, start_wall: float) -> None:
        assert self._speed is not None
        ahead_secs = virtual_elapsed_secs / self._speed - (self._wall_secs() - start_wall)
        if ahead_secs > 0:
            await asyncio.sleep(ahead_secs)


class _Turns:
    """``ReplayDriver.run`` unpaced, as a chain of loop callbacks instead of a task's steps.

    Each callback takes the place in the loop's queue the driver's task step would have taken
    (``settle``'s ``sleep(0)`` queues that step last, so does ``call_soon``) and does what that
    step would: look whether anything else is runnable, else release the next instant. The
    loop runs the same callbacks in the same order, minus resuming the driver's coroutines on
    every turn of every instant (two or three turns an instant, about a million instants in a
    replayed year). A busy probe is waited out as ``settle`` does: the poll, then a turn.
    """

    def __init__(
        self,
        driver: ReplayDriver,
        loop: asyncio.AbstractEventLoop,
        done: asyncio.Future[DriveResult],
    ) -> None:
        self._driver = driver
        self._loop = loop
        self._ready = _ready_queue(loop)
        self._busy = driver._busy
        self._done = done

    def start(self) -> None:
        self._loop.call_soon(self._turn)

    def _turn(self) -> None:
        if self._done.done():
            return  # the drive was cancelled
        try:
            if len(self._ready):
                self._loop.call_soon(self._turn)
                return
            for probe in self._busy:  # not any(...): a generator made every turn of a replay
                if probe():
                    # settle's sleep(BUSY_POLL_SECS): the timer, the task's wake-up, its sleep(0)
                    self._loop.call_later(BUSY_POLL_SECS, self._loop.call_soon, self._after_poll)
                    return
            result = self._driver._release_next()
        except Exception as exc:
            self._done.set_exception(exc)
            return
        if result is None:
            self._loop.call_soon(self._turn)
        else:
            self._done.set_result(result)

    def _after_poll(self) -> None:
        if not self._done.done():
            self._loop.call_soon(self._turn)


__all__ = ["BUSY_POLL_SECS", "DriveResult", "ReplayDriver"]
