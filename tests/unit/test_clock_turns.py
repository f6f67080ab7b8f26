"""At an instant ``release_next(until_ms=...)`` releases, a passable sleeper due is given its turn
instead of being woken: passed over if ``idle()`` holds at that turn, else woken right there. The
run must be the one in which every sleeper wakes (``pass_idle=False``), order included."""

from __future__ import annotations

import asyncio

from fakes.tasks import stop_tasks
from hypothesis import given, settings
from hypothesis import strategies as st
from property_budget import examples

from core.clock import VirtualClock
from runner.replay.driver import ReplayDriver

EPOCH_MS = 1_740_787_200_000  # 2025-03-01T00:00Z

Trace = list[tuple[str, float]]


async def _checker(
    clock: VirtualClock, name: str, secs: float, wanted: dict[str, bool], trace: Trace
) -> None:
    """A periodic check with work only when ``wanted[name]`` (set by others); its passed-over
    turns still count (``passed``), as the position tracker's cycles do."""
    cycles = 0

    def passed() -> float:
        nonlocal cycles
        cycles += 1
        return secs

    while True:
        await clock.sleep(secs, idle=lambda: not wanted[name], passed=passed)
        cycles += 1
        if wanted[name]:
            wanted[name] = False
            trace.append((f"{name} cycle {cycles}", clock.monotonic_secs()))


async def _writer(
    clock: VirtualClock,
    name: str,
    secs: float,
    targets: list[str],
    wanted: dict[str, bool],
    trace: Trace,
) -> None:
    """A plain periodic loop that, at its n-th wake-up, gives work to checker n (mod)."""
    n = 0
    while True:
        await clock.sleep(secs)
        trace.append((name, clock.monotonic_secs()))
        if targets:
            target = targets[n % len(targets)]
            if target:
                wanted[target] = True
        n += 1


async def _run(
    checkers: list[float],
    writers: list[tuple[float, list[str]]],
    order: list[int],
    end_secs: int,
    pass_idle: bool,
) -> tuple[Trace, int]:
    """The loops start in ``order`` (checkers first in the numbering), which is the FIFO order
    of their equal deadlines."""
    clock = VirtualClock(EPOCH_MS)
    trace: Trace = []
    wanted = {f"c{i}": False for i in range(len(checkers))}
    loops = [_checker(clock, f"c{i}", secs, wanted, trace) for i, secs in enumerate(checkers)]
    loops += [
        _writer(clock, f"w{i}", secs, targets, wanted, trace)
        for i, (secs, targets) in enumerate(writers)
    ]
    tasks = [asyncio.create_task(loops[i]) for i in order]
    await asyncio.sleep(0)
    result = await ReplayDriver(clock, EPOCH_MS + end_secs * 1000, pass_idle=pass_idle).run()
    trace.append(("end", result.reached_ms))
    await stop_tasks(*tasks)
    return trace, clock.passed_over


periods = st.sampled_from([5.0, 7.5, 10.0, 15.0, 30.0])


@settings(max_examples=examples(100), deadline=None)
@given(
    checkers=st.lists(periods, min_size=1, max_size=4),
    writers=st.lists(
        st.tuples(periods, st.lists(st.sampled_from(["", "c0", "c1", "c2", "c3"]), max_size=5)),
        min_size=1,
        max_size=3,
    ),
    end_secs=st.integers(min_value=1, max_value=240),
    data=st.data(),
)
def test_turns_given_to_idle_sleepers_make_the_same_run(
    checkers: list[float],
    writers: list[tuple[float, list[str]]],
    end_secs: int,
    data: st.DataObject,
) -> None:
    names = {f"c{i}" for i in range(len(checkers))}
    writers = [(secs, [t for t in targets if t in names or not t]) for secs, targets in writers]
    order = data.draw(st.permutations(range(len(checkers) + len(writers))))
    woken, none_passed = asyncio.run(_run(checkers, writers, order, end_secs, pass_idle=False))
    turned, _ = asyncio.run(_run(checkers, writers, order, end_secs, pass_idle=True))
    assert none_passed == 0
    assert turned == woken


async def test_an_idle_sleeper_made_busy_before_its_turn_wakes_in_its_turn() -> None:
    """Due together, FIFO: a writer, a checker it gives work to, another writer. The checker was
    idle when the instant was released; at its turn it is not: it must run before the second
    writer, as it would have had it been woken."""
    clock = VirtualClock(EPOCH_MS)
    trace: Trace = []
    wanted = {"c0": False}
    tasks = [asyncio.create_task(_writer(clock, "w0", 10, ["c0"], wanted, trace))]
    await asyncio.sleep(0)
    tasks.append(asyncio.create_task(_checker(clock, "c0", 10, wanted, trace)))
    await asyncio.sleep(0)
    tasks.append(asyncio.create_task(_writer(clock, "w1", 10, [], wanted, trace)))
    await asyncio.sleep(0)
    assert clock.release_next(until_ms=EPOCH_MS + 100_000) == 10.0
    for _ in range(5):
        await asyncio.sleep(0)
    assert trace == [("w0", 10.0), ("c0 cycle 1", 10.0), ("w1", 10.0)]
    await stop_tasks(*tasks)


async def test_an_idle_sleeper_passes_its_turn_and_keeps_its_place() -> None:
    clock = VirtualClock(EPOCH_MS)
    trace: Trace = []
    wanted = {"c0": False}
    tasks = [asyncio.create_task(_checker(clock, "c0", 10, wanted, trace))]
    await asyncio.sleep(0)
    tasks.append(asyncio.create_task(_writer(clock, "w0", 10, [], wanted, trace)))
    await asyncio.sleep(0)
    assert clock.release_next(until_ms=EPOCH_MS + 100_000) == 10.0
    for _ in range(3):
        await asyncio.sleep(0)
    assert trace == [("w0", 10.0)]
    assert clock.next_deadline_secs() == 20.0 and clock.pending_sleepers == 2
    wanted["c0"] = True  # at 20 the checker, registered again first, runs first
    assert clock.release_next(until_ms=EPOCH_MS + 100_000) == 20.0
    for _ in range(3):
        await asyncio.sleep(0)
    assert trace == [("w0", 10.0), ("c0 cycle 2", 20.0), ("w0", 20.0)]
    await stop_tasks(*tasks)


async def test_a_sleeper_cancelled_before_its_turn_is_only_cancelled() -> None:
    clock = VirtualClock(EPOCH_MS)
    trace: Trace = []
    wanted = {"c0": False}
    checker = asyncio.create_task(_checker(clock, "c0", 10, wanted, trace))
    await asyncio.sleep(0)
    writer = asyncio.create_task(_writer(clock, "w0", 10, [], wanted, trace))
    await asyncio.sleep(0)
    clock.release_next(until_ms=EPOCH_MS + 100_000)
    await stop_tasks(checker)
    await asyncio.sleep(0)
    assert checker.cancelled() and trace == [("w0", 10.0)]
    assert clock.next_deadline_secs() == 20.0 and clock.pending_sleepers == 1  # the writer's
    await stop_tasks(writer)
