"""VirtualClock passes over instants at which only idle periodic checks are due, and a replay
driven that way is the same run as one that wakes every check."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from fakes.instant_clock import InstantClock
from fakes.tasks import stop_tasks
from hypothesis import given, settings
from hypothesis import strategies as st
from property_budget import examples

from core.bus import EventBus
from core.clock import VirtualClock, sleep_passable
from core.events import DecisionRequested, Event, MarketTick, Topic
from runner.replay.driver import ReplayDriver
from runner.watchdog import Watchdog

EPOCH_MS = 1_740_787_200_000  # 2025-03-01T00:00Z


async def _periodic(
    clock: VirtualClock, name: str, secs: float, idle: Callable[[], bool], woke: list[str]
) -> None:
    while True:
        await clock.sleep(secs, idle=idle)
        woke.append(f"{name}@{clock.monotonic_secs():g}")


async def test_an_instant_where_every_due_sleeper_is_idle_is_passed_over() -> None:
    clock = VirtualClock(EPOCH_MS)
    woke: list[str] = []
    busy_at = {30.0}
    check = asyncio.create_task(
        _periodic(clock, "check", 10, lambda: clock.monotonic_secs() not in busy_at, woke)
    )
    await asyncio.sleep(0)
    assert clock.release_next(until_ms=EPOCH_MS + 100_000) == 30.0  # 10 and 20 passed over
    assert clock.passed_over == 2
    await asyncio.sleep(0)
    assert woke == ["check@30"]
    assert clock.next_deadline_secs() == 40.0
    check.cancel()


async def test_a_due_sleeper_that_is_not_passable_releases_the_instant() -> None:
    clock = VirtualClock(EPOCH_MS)
    woke: list[str] = []
    tasks = [asyncio.create_task(_periodic(clock, "check", 10, lambda: True, woke))]
    await asyncio.sleep(0)
    plain = asyncio.create_task(clock.sleep(20))
    await asyncio.sleep(0)
    assert clock.release_next(until_ms=EPOCH_MS + 100_000) == 20.0
    await asyncio.sleep(0)
    assert plain.done()
    # the idle check due with it had its turn (in FIFO order) and passed it: next at 30
    assert woke == []
    assert clock.passed_over == 1 and clock.next_deadline_secs() == 30.0
    for task in tasks:
        task.cancel()


async def test_passing_over_stops_before_the_limit() -> None:
    clock = VirtualClock(EPOCH_MS)
    woke: list[str] = []
    task = asyncio.create_task(_periodic(clock, "check", 10, lambda: True, woke))
    await asyncio.sleep(0)
    assert clock.release_next(until_ms=EPOCH_MS + 35_000) == 30.0
    assert clock.now_ms() == EPOCH_MS + 30_000  # time moved as if the checks had run
    assert clock.next_deadline_secs() == 40.0  # at or after the limit: left for the caller
    assert woke == []
    task.cancel()


async def test_without_a_limit_release_next_wakes_idle_sleepers_too() -> None:
    clock = VirtualClock(EPOCH_MS)
    woke: list[str] = []
    task = asyncio.create_task(_periodic(clock, "check", 10, lambda: True, woke))
    await asyncio.sleep(0)
    assert clock.release_next() == 10.0
    await asyncio.sleep(0)
    assert woke == ["check@10"] and clock.passed_over == 0
    task.cancel()


@pytest.mark.parametrize("secs", [0.0, -1.0, float("nan")])
async def test_a_passable_sleep_without_a_positive_period_is_refused(secs: float) -> None:
    # passed over, such a sleep would fall due again at the same instant: release_next would spin
    clock = VirtualClock(EPOCH_MS)
    with pytest.raises(ValueError, match="positive period"):
        await clock.sleep(secs, idle=lambda: True)
    assert clock.pending_sleepers == 0


async def test_other_clocks_just_sleep() -> None:
    clock = InstantClock()
    await sleep_passable(clock, 5.0, idle=lambda: True)
    assert clock.monotonic_secs() >= 5.0


async def _run_day(
    data_secs: list[int], other_secs: float, end_secs: int, *, pass_idle: bool
) -> tuple[list[tuple[str, int, int]], int]:
    """A watchdog, a feed publishing ticks at ``data_secs`` and a periodic loop that reads the
    clock; what they saw, in order."""
    clock = VirtualClock(EPOCH_MS)
    bus = EventBus()
    trace: list[tuple[str, int, int]] = []
    watchdog = Watchdog(clock, bus, silence_secs=60.0, check_secs=15.0)
    bus.subscribe(Topic.MARKET_TICK, watchdog.on_market_data)

    def on_request(event: Event) -> None:
        assert isinstance(event, DecisionRequested)
        trace.append(("request", event.at_ms, len(trace)))

    bus.subscribe(Topic.DECISION_REQUESTED, on_request)

    async def feed() -> None:
        last = 0
        for at in data_secs:
            await clock.sleep(at - last)
            last = at
            bus.publish(_tick(clock.now_ms()))
            trace.append(("tick", clock.now_ms(), len(trace)))

    async def other() -> None:
        while True:
            await clock.sleep(other_secs)
            trace.append(("other", clock.now_ms(), len(trace)))

    tasks = [asyncio.create_task(coro) for coro in (watchdog.run(), feed(), other())]
    await asyncio.sleep(0)
    driver = ReplayDriver(clock, EPOCH_MS + end_secs * 1000, pass_idle=pass_idle)
    result = await driver.run()
    trace.append(("end", result.reached_ms, result.steps + clock.passed_over))
    await stop_tasks(*tasks)
    return trace, clock.passed_over


def _tick(at_ms: int) -> MarketTick:
    return MarketTick(
        ticker="BTC/USDT",
        timeframe="5m",
        open_time_ms=at_ms - at_ms % 300_000,
        close_time_ms=at_ms - at_ms % 300_000 + 299_999,
        open=1.0,
        high=1.0,
        low=1.0,
        close=1.0,
        volume=0.0,
        closed=False,
        event_time_ms=at_ms,
    )


@settings(max_examples=examples(60), deadline=None)
@given(
    gaps=st.lists(st.integers(min_value=1, max_value=400), min_size=0, max_size=30),
    other_secs=st.sampled_from([7.5, 15.0, 30.0, 45.0, 75.0]),
    tail_secs=st.integers(min_value=0, max_value=600),
)
def test_a_run_that_passes_idle_checks_over_is_the_same_run(
    gaps: list[int], other_secs: float, tail_secs: int
) -> None:
    """Gaps in the data (the watchdog fires in them) and a loop sharing some of its instants:
    the ticks, requests, other wake-ups, their order and the clock's final reading all match."""
    data_secs = [sum(gaps[: i + 1]) for i in range(len(gaps))]
    end_secs = (data_secs[-1] if data_secs else 0) + tail_secs + 1
    woken, none_passed = asyncio.run(_run_day(data_secs, other_secs, end_secs, pass_idle=False))
    passed, _ = asyncio.run(_run_day(data_secs, other_secs, end_secs, pass_idle=True))
    assert none_passed == 0
    assert passed == woken


def test_the_watchdogs_idle_checks_between_ticks_are_passed_over() -> None:
    trace, passed_over = asyncio.run(_run_day([75, 150, 225], 75.0, 300, pass_idle=True))
    # 19 checks before the end, 3 shared with the ticks and the 75-s loop, 4 due (60 s of silence)
    assert passed_over == 12
    requests = [at - EPOCH_MS for kind, at, _ in trace if kind == "request"]
    assert requests == [60_000, 135_000, 210_000, 285_000]
    silent, _ = asyncio.run(_run_day([], 1000.0, 200, pass_idle=True))
    assert [(kind, at) for kind, at, _ in silent if kind == "request"] == [
        ("request", EPOCH_MS + 60_000),
        ("request", EPOCH_MS + 120_000),
        ("request", EPOCH_MS + 180_000),
    ]
