"""The Clock port and its three adapters.

Domain code never reads the system time or calls ``asyncio.sleep`` directly: it asks an injected
``Clock``. Three clocks share one contract (``tests/unit/test_clock_contract.py``):

- ``WallClock``: real time, for the live daemon.
- ``ScaledClock`` (``core.scaled_clock``): time runs ``speed`` times faster than real time from a chosen epoch, so the daemon
  and the simulator agree on a simulated instant of the recorded data. ``hold()`` stops it while
  CPU-bound work runs (the simulator's daemon holds it during a regime fit: half a second of CPU is
  minutes of simulated time at high speed, time a live daemon never loses).
- ``VirtualClock``: time moves only when a driver advances it; sleepers wake in virtual-time order.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import time
from collections.abc import Callable
from datetime import UTC, date, datetime
from heapq import heappop, heappush
from typing import Any, Final, NamedTuple, Protocol, runtime_checkable

#: milliseconds in a UTC day (Unix time has no leap seconds)
DAY_MS: Final = 86_400_000
#: times vigil's data and journals can hold (2010-01-01 .. 2100-01-01 UTC): anything outside is a
#: unit slip (seconds, or microseconds read as ms) or a corrupt cell, and would be read as 1970 or
#: a year that has no date
EARLIEST_TIME_MS: Final = 1_262_304_000_000
LATEST_TIME_MS: Final = 4_102_444_800_000
RECORDING_YEARS: Final = "2010 .. 2100"
#: the whole UTC days in that range: what a replay, a sweep's period or an API run may ask for
FIRST_RECORDING_DAY: Final = date(2010, 1, 1)
LAST_RECORDING_DAY: Final = date(2099, 12, 31)


def is_recording_time(value: object) -> bool:
    """A whole number of milliseconds within ``RECORDING_YEARS`` (not a bool: ``True`` is 1)."""
    return type(value) is int and EARLIEST_TIME_MS <= value < LATEST_TIME_MS


def utc_minute(at_ms: int) -> str:
    """``at_ms`` as people read it in messages and status lines: ``2025-03-01 14:05 UTC``."""
    return datetime.fromtimestamp(at_ms / 1000, UTC).strftime("%Y-%m-%d %H:%M UTC")


@runtime_checkable
class Clock(Protocol):
    """What every loop and timer reads: an epoch instant, a monotonic reading and a sleep."""

    def now_ms(self) -> int:
        """Current (possibly simulated) Unix time in milliseconds."""
        ...

    def monotonic_secs(self) -> float:
        """Seconds on a clock that never goes backwards, in the same time scale as ``sleep``."""
        ...

    async def sleep(self, secs: float) -> None:
        """Suspend for ``secs`` seconds of this clock's time."""
        ...


class WallClock:
    """Real time."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic_secs(self) -> float:
        return time.monotonic()

    async def sleep(self, secs: float) -> None:
        await asyncio.sleep(max(0.0, secs))


class _Passable(NamedTuple):
    """A periodic sleep the clock may pass over: see ``VirtualClock.sleep``."""

    secs: float
    idle: Callable[[], bool]
    passed: Callable[[], float] | None


#: (deadline, FIFO sequence, the sleep's future, its passable settings or None)
_Sleeper = tuple[float, int, asyncio.Future[None], _Passable | None]


class VirtualClock:
    """Time that advances only when a driver says so.

    ``sleep`` registers a wake-up at ``now + secs``; ``advance``/``advance_to`` move time forward,
    waking sleepers one deadline at a time (earliest first, FIFO among equal deadlines) and letting
    the event loop run the woken tasks before time moves on, so they observe the instant they woke at.
    """

    #: event-loop turns given to woken tasks before time moves again
    SETTLE_TURNS = 8

    def __init__(self, epoch_ms: int = 0) -> None:
        self._epoch_ms = epoch_ms
        self._now_secs = 0.0
        # (seconds, now_ms at them): time's seconds stay the very same float object until time
        # moves (every move assigns another), so a reading at them answers again (ticks, a
        # replay's driver and broker ask the same instant's ms several times); one tuple, so a
        # reader never pairs one instant's seconds with another's ms
        self._ms_memo: tuple[float | None, int] = (None, 0)
        self._sleepers: list[_Sleeper] = []
        self._seq = itertools.count()
        self._parked: dict[asyncio.Task[Any], int] = {}  # task -> sleeps it awaits right now
        self.released = 0  # instants ``release_next`` released (woke their sleepers)
        self.passed_over = 0  # instants ``release_next`` passed over (every sleeper due was idle)

    def now_ms(self) -> int:
        secs = self._now_secs
        memo = self._ms_memo
        if memo[0] is secs:
            return memo[1]
        ms = self._epoch_ms + round(secs * 1000.0)
        self._ms_memo = (secs, ms)
        return ms

    def monotonic_secs(self) -> float:
        return self._now_secs

    def ms_at(self, monotonic_secs: float) -> int:
        """``now_ms`` as it will read once time has moved to ``monotonic_secs``."""
        return self.now_ms() + round((monotonic_secs - self._now_secs) * 1000)

    async def sleep(
        self,
        secs: float,
        *,
        idle: Callable[[], bool] | None = None,
        passed: Callable[[], float] | None = None,
    ) -> None:
        """Wake at ``now + secs``.

        ``idle`` marks a periodic loop's sleep (``while True: await sleep(secs, idle=f); work()``)
        whose wake-up does nothing when ``idle()`` is true (read at the wake-up's instant) but
        sleep ``secs`` again. ``release_next(until_ms=...)`` passes over an instant at which every
        sleeper due is such a sleep: it registers each one's next sleep itself, in the order the
        woken loops would have, so the run is the same, minus the loop turns.

        ``passed``, for a loop whose idle turn still moves some bookkeeping on (a cycle count, a
        grid of due times): called in place of that turn when the instant is passed over, it does
        that bookkeeping and returns the seconds the loop's next sleep would have been.
        """
        if idle is not None and not secs > 0.0:  # passed over, it would fall due again at once
            raise ValueError(f"a passable (periodic) sleep needs a positive period, got {secs!r}")
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        passable = None if idle is None else _Passable(secs, idle, passed)
        deadline = self._now_secs + max(0.0, secs)
        heappush(self._sleepers, (deadline, next(self._seq), future, passable))
        task = asyncio.current_task()
        if task is None:
            await future
            return
        self._parked[task] = self._parked.get(task, 0) + 1
        try:
            await future
        finally:
            left = self._parked.pop(task) - 1
            if left:
                self._parked[task] = left

    def is_parked(self, task: asyncio.Task[Any] | None) -> bool:
        """Is ``task`` waiting on this clock right now? A busy worker parked here (a retry's
        backoff inside a decision) needs time to move, so a driver must not wait for it."""
        return task is not None and task in self._parked

    @property
    def pending_sleepers(self) -> int:
        return sum(1 for _, _, f, _ in self._sleepers if not f.done())

    def next_deadline_secs(self) -> float | None:
        """Monotonic reading of the earliest live sleeper, or None when nobody sleeps."""
        self._drop_cancelled()
        return self._sleepers[0][0] if self._sleepers else None

    def release_next(self, *, until_ms: int | None = None) -> float | None:
        """Move time to the earliest live deadline and wake every sleeper due then (FIFO), without
        yielding: the caller decides how long to let them run (replay waits for quiescence).
        Returns the new monotonic reading, or None when nobody sleeps.

        With ``until_ms``, an instant at which every sleeper due is an idle passable sleep (see
        ``sleep``) is passed over rather than released, as long as the next deadline is before
        ``until_ms``; time still moves to it, exactly as if its sleepers had woken and gone back
        to sleep.
        """
        # Written out (no helper calls, one deadline look per instant, a lone sleeper due kept
        # out of a list): a replayed year passes over 1.5 M instants and releases 0.6 M here.
        sleepers = self._sleepers
        while sleepers and sleepers[0][2].done():
            heappop(sleepers)
        if not sleepers:
            return None
        if until_ms is None:
            self._release(self._pop_due(heappop(sleepers)), turns=False)
            self.released += 1
            return self._now_secs
        # a deadline this far before ``until_ms`` reads before it whatever the rounding (``ms_at``
        # rounds twice: at most a millisecond up), so only those near it take the exact reading
        near_secs = (until_ms - self._epoch_ms) / 1000.0 - 1.0
        while True:
            entry = heappop(sleepers)
            deadline = entry[0]
            if deadline > self._now_secs:  # noqa: PLR1730  # max() is a call, 2 M instants a year
                self._now_secs = deadline
            if not sleepers or sleepers[0][0] > deadline:
                passable = entry[3]  # the one sleeper due (most instants passed over)
                if passable is None or not passable.idle():
                    self._release([entry], turns=True)
                    self.released += 1
                    return self._now_secs
                self._sleep_again(entry[2], passable)
            elif not self._pass_over(self._pop_due(entry)):
                return self._now_secs
            self.passed_over += 1
            while sleepers and sleepers[0][2].done():
                heappop(sleepers)
            if not sleepers:
                return self._now_secs
            following = sleepers[0][0]
            if following >= near_secs and self.ms_at(following) >= until_ms:
                return self._now_secs

    def _pop_due(self, first: _Sleeper) -> list[_Sleeper]:
        """``first`` (popped already, live) and every other live sleeper due at its deadline,
        FIFO; time moved to that deadline."""
        deadline = first[0]
        self._now_secs = max(self._now_secs, deadline)
        sleepers = self._sleepers
        due = [first]
        while sleepers and sleepers[0][0] <= deadline:
            entry = heappop(sleepers)
            if not entry[2].done():
                due.append(entry)
        return due

    def _pass_over(self, due: list[_Sleeper]) -> bool:
        """Several sleepers due: pass the instant over (True) when each is an idle passable
        sleep, their next sleeps registered in FIFO order; else release it with turns (False)."""
        for entry in due:
            passable = entry[3]
            if passable is None or not passable.idle():
                self._release(due, turns=True)
                self.released += 1
                return False
        for _, _, future, passable in due:
            self._sleep_again(future, passable)  # type: ignore[arg-type]  # all passable
        return True

    def _sleep_again(self, future: asyncio.Future[None], passable: _Passable) -> None:
        """The next sleep of a passable sleeper whose wake-up is passed over."""
        secs = passable.secs if passable.passed is None else passable.passed()
        heappush(
            self._sleepers,
            (self._now_secs + (secs if secs > 0.0 else 0.0), next(self._seq), future, passable),
        )

    def _release(self, due: list[_Sleeper], *, turns: bool) -> None:
        """Wake the sleepers due, FIFO. With ``turns``, the task of a passable sleep idle now is
        not woken: a callback takes the place in the loop's queue its wake-up would have taken
        (same context) and passes the turn over if ``idle()`` still holds then, exactly as
        ``release_next`` passes an instant over, or else runs the wake-up right there. At an
        instant released for a tick, an idle periodic check (the watchdog's, nearly always)
        then costs a call, not a task step."""
        for _, _, future, passable in due:
            if (
                turns
                and passable is not None
                and passable.idle()  # busy now: woken as ever (its wake-up reads its own state)
                and (wakeup := _sole_callback(future)) is not None
            ):
                callback, context = wakeup
                future.get_loop().call_soon(self._turn, future, passable, callback, context=context)
            else:
                future.set_result(None)

    def _turn(
        self,
        future: asyncio.Future[None],
        passable: _Passable,
        wakeup: Callable[[asyncio.Future[None]], object],
    ) -> None:
        if future.done():
            return  # cancelled since it was due: the cancellation wakes its task
        if passable.idle():
            self._sleep_again(future, passable)
            return
        # not idle after all: the task's wake-up, in its turn (set_result would queue it last)
        future.remove_done_callback(wakeup)
        future.set_result(None)
        wakeup(future)

    async def advance(self, secs: float) -> None:
        await self.advance_to(self._now_secs + secs)

    async def advance_to(self, target_secs: float) -> None:
        """Move time to ``target_secs`` (monotonic reading), waking every sleeper due on the way."""
        await _settle(self.SETTLE_TURNS)
        while True:
            self._drop_cancelled()
            if not self._sleepers or self._sleepers[0][0] > target_secs:
                break
            deadline, _, future, _ = heappop(self._sleepers)
            self._now_secs = max(self._now_secs, deadline)
            future.set_result(None)
            await _settle(self.SETTLE_TURNS)
        self._now_secs = max(self._now_secs, target_secs)
        await _settle(self.SETTLE_TURNS)

    async def step(self) -> bool:
        """Jump to the next sleeper's deadline and wake it; False when nobody sleeps."""
        deadline = self.next_deadline_secs()
        if deadline is None:
            return False
        await self.advance_to(deadline)
        return True

    def _drop_cancelled(self) -> None:
        while self._sleepers and self._sleepers[0][2].done():
            heappop(self._sleepers)


def _sole_callback(
    future: asyncio.Future[None],
) -> tuple[Callable[[asyncio.Future[None]], object], contextvars.Context] | None:
    """The one done-callback of a sleep's future (its task's wake-up) with its context; None
    when it has none or several (then only ``set_result`` wakes them as asyncio would)."""
    callbacks = getattr(future, "_callbacks", None)  # asyncio's futures, C or Python, have it
    if not callbacks or len(callbacks) != 1:
        return None
    callback, context = callbacks[0]
    return callback, context


async def sleep_passable(
    clock: Clock,
    secs: float,
    idle: Callable[[], bool],
    passed: Callable[[], float] | None = None,
) -> None:
    """``clock.sleep(secs)`` for a periodic loop whose wake-up does nothing while ``idle()``: a
    ``VirtualClock`` may pass over such wake-ups (``VirtualClock.sleep``, also for ``passed``);
    other clocks just sleep."""
    if isinstance(clock, VirtualClock):
        await clock.sleep(secs, idle=idle, passed=passed)
    else:
        await clock.sleep(secs)


async def _settle(turns: int) -> None:
    for _ in range(turns):
        await asyncio.sleep(0)
