"""The unpaced ``ReplayDriver`` runs as loop callbacks instead of a task's steps: the loop must
run the same work on the same turns as with the driver's task (the paced driver, never ahead)."""

from __future__ import annotations

import asyncio

import pytest
from fakes.tasks import stop_tasks
from hypothesis import given, settings
from hypothesis import strategies as st
from property_budget import examples

from core.clock import VirtualClock
from runner.replay.driver import DriveResult, ReplayDriver

EPOCH_MS = 1_740_787_200_000  # 2025-03-01T00:00Z

#: (what, clock ms, loop turn)
Trace = list[tuple[str, int, int]]
#: a periodic loop: (period s, awaits of sleep(0) after each wake-up, a child task's awaits or
#: None, call_soon callbacks chained)
Loop = tuple[float, int, int | None, int]


class _CountingLoop(asyncio.SelectorEventLoop):
    turns = 0

    def _run_once(self) -> None:
        self.turns += 1
        super()._run_once()  # type: ignore[misc]


def _run(loops: list[Loop], end_secs: int, *, task_stepped: bool) -> tuple[Trace, DriveResult]:
    loop = _CountingLoop()
    try:
        return loop.run_until_complete(_drive(loop, loops, end_secs, task_stepped))
    finally:
        loop.close()


async def _drive(
    event_loop: _CountingLoop, loops: list[Loop], end_secs: int, task_stepped: bool
) -> tuple[Trace, DriveResult]:
    clock = VirtualClock(EPOCH_MS)
    trace: Trace = []

    def note(what: str) -> None:
        trace.append((what, clock.now_ms(), event_loop.turns))

    async def work(name: str, awaits: int) -> None:
        for i in range(awaits):
            await asyncio.sleep(0)
            note(f"{name} {i}")

    def chained(name: str, left: int) -> None:
        note(f"{name} callback {left}")
        if left > 1:
            event_loop.call_soon(chained, name, left - 1)

    async def periodic(name: str, secs: float, awaits: int, child: int | None, calls: int) -> None:
        while True:
            await clock.sleep(secs)
            note(f"{name} woke")
            if child is not None:
                asyncio.get_running_loop().create_task(work(f"{name} child", child))
            if calls:
                event_loop.call_soon(chained, name, calls)
            await work(name, awaits)

    tasks = [asyncio.create_task(periodic(f"p{i}", *spec)) for i, spec in enumerate(loops)]
    # never ahead of real time at this speed: the task-stepped loop without any pacing sleep
    speed = 1e12 if task_stepped else None
    driver = ReplayDriver(clock, EPOCH_MS + end_secs * 1000, speed=speed, pass_idle=False)
    steps: list[int] = []
    driver.on_step = steps.append
    result = await driver.run()
    note("end")
    await stop_tasks(*tasks)
    return trace + [("step", ms, 0) for ms in steps], result


loop_specs = st.tuples(
    st.sampled_from([1.0, 1.5, 2.0, 3.0, 5.0]),
    st.integers(0, 6),
    st.one_of(st.none(), st.integers(0, 4)),
    st.integers(0, 4),
)


@settings(max_examples=examples(60), deadline=None)
@given(loops=st.lists(loop_specs, min_size=1, max_size=4), end_secs=st.integers(1, 20))
def test_the_callback_driver_runs_the_task_drivers_turns(loops: list[Loop], end_secs: int) -> None:
    stepped, stepped_result = _run(loops, end_secs, task_stepped=True)
    chained, chained_result = _run(loops, end_secs, task_stepped=False)
    # every event on the same turn; only "end" may come a turn later (the callbacks hand the
    # result to the driver's task, which wakes on the next turn)
    assert _without_end_turn(chained) == _without_end_turn(stepped)
    assert chained_result == stepped_result


def _without_end_turn(trace: Trace) -> Trace:
    return [(what, ms, 0 if what == "end" else turn) for what, ms, turn in trace]


async def test_a_failing_step_fails_the_drive() -> None:
    clock = VirtualClock(EPOCH_MS)
    task = asyncio.create_task(clock.sleep(1))

    def on_step(_: int) -> None:
        raise RuntimeError("progress broke")

    with pytest.raises(RuntimeError, match="progress broke"):
        await ReplayDriver(clock, EPOCH_MS + 60_000, on_step=on_step).run()
    await task


async def test_cancelling_the_drive_stops_its_turns() -> None:
    clock = VirtualClock(EPOCH_MS)
    released: list[int] = []
    third = asyncio.Event()

    async def ticker() -> None:
        while True:
            await clock.sleep(1)
            released.append(clock.now_ms())
            if len(released) == 3:
                third.set()

    tick = asyncio.create_task(ticker())
    driving = asyncio.create_task(ReplayDriver(clock, EPOCH_MS + 10**9).run())
    await third.wait()
    await stop_tasks(driving)
    count = len(released)
    await asyncio.sleep(0.01)  # real time: a live chain of turns would have moved the clock on
    assert driving.cancelled() and len(released) == count
    await stop_tasks(tick)
