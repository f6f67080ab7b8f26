"""The replay's driver and virtual clock, per simulated minute, without anything else to do.

A replay's clock releases an instant whenever a tick is due and passes over the instants at which
only idle periodic checks would wake (``core.clock.VirtualClock.release_next(until_ms=...)``). This
bench gives it the year's pattern over ten simulated days: a tick loop every 60 s handing 7 ticks
to the real ``Watchdog`` (checking every 15 s), a tracker-like passable cycle every 30 s, and a
5-minute poller. It prints the best of five runs in µs per simulated minute, with the instants
released and passed over (the same counts on every run: the timing is what may move).
"""

from __future__ import annotations

import asyncio
import time

from core.bus import EventBus
from core.clock import VirtualClock, sleep_passable
from core.events import Event
from runner.replay.driver import ReplayDriver
from runner.watchdog import Watchdog

START_MS = 1_740_787_200_000  # 2025-03-01 00:00 UTC
DAYS = 10
ROUNDS = 5


class _Tick:
    """Market data that is not a ``MarketTick``: the watchdog notes it, no stream report."""


async def _run(days: int) -> tuple[float, int, int]:
    clock = VirtualClock(START_MS)
    watchdog = Watchdog(clock, EventBus(), silence_secs=300, check_secs=15)
    tick: Event = _Tick()  # type: ignore[assignment]  # the watchdog only notes its arrival

    async def ticks() -> None:
        while True:
            await clock.sleep(60)
            for _ in range(7):
                watchdog.on_market_data(tick)

    async def tracker() -> None:
        while True:
            await sleep_passable(clock, 30.0, idle=lambda: True, passed=lambda: 30.0)

    async def poller() -> None:
        while True:
            await clock.sleep(300)

    tasks = [asyncio.create_task(c) for c in (ticks(), watchdog.run(), tracker(), poller())]
    await asyncio.sleep(0)
    started = time.perf_counter()
    result = await ReplayDriver(clock, START_MS + days * 86_400_000).run()
    elapsed = time.perf_counter() - started
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return elapsed, result.steps, clock.passed_over


def main() -> None:
    runs = [asyncio.run(_run(DAYS)) for _ in range(ROUNDS)]
    best, steps, passed_over = min(runs)
    minutes = DAYS * 1440
    print(
        f"driver + clock over {DAYS} simulated days: {best / minutes * 1e6:.2f} us per simulated "
        f"minute (best of {ROUNDS}); {steps:,} instants released, {passed_over:,} passed over"
    )


if __name__ == "__main__":
    main()
