"""``VirtualClock.release_next`` is written out for speed (a lone sleeper due kept out of a list,
one deadline look per instant, the limit's ``ms_at`` inline): it must make the very run its plain
definition makes, kept here: the same instants released and passed over, the same ``idle()`` and
``passed()`` calls in the same order, the same wake-ups and the same sequence numbers."""

from __future__ import annotations

import asyncio
import heapq

from fakes.tasks import stop_tasks
from hypothesis import given, settings
from hypothesis import strategies as st
from property_budget import examples

from core.clock import VirtualClock

EPOCH_MS = 1_740_787_200_000  # 2025-03-01T00:00Z


class _PlainClock(VirtualClock):
    """``release_next`` as defined: every sleeper due popped into a list, asked ``idle()`` in
    FIFO order, passed over by registering their next sleeps, until the next deadline's
    ``ms_at`` reaches the limit."""

    def release_next(self, *, until_ms: int | None = None) -> float | None:
        while True:
            deadline = self.next_deadline_secs()
            if deadline is None:
                return None
            self._now_secs = max(self._now_secs, deadline)
            due = []
            while self._sleepers and self._sleepers[0][0] <= deadline:
                entry = heapq.heappop(self._sleepers)
                if not entry[2].done():
                    due.append(entry)
            if until_ms is None or not all(p is not None and p.idle() for *_, p in due):
                self._release(due, turns=until_ms is not None)
                self.released += 1
                return self._now_secs
            for _, _, future, passable in due:
                assert passable is not None
                secs = passable.secs if passable.passed is None else passable.passed()
                entry = (self._now_secs + max(0.0, secs), next(self._seq), future, passable)
                heapq.heappush(self._sleepers, entry)
            self.passed_over += 1
            following = self.next_deadline_secs()
            if following is None or self.ms_at(following) >= until_ms:
                return self._now_secs


#: a loop: (period s, passable, the wake-ups (by count) at which it is busy, its passed() secs
#: or None, the release after which it is cancelled or None)
Loop = tuple[float, bool, frozenset[int], float | None, int | None]


async def _run(clock: VirtualClock, loops: list[Loop], limits: list[int | None]) -> list[object]:
    trace: list[object] = []

    async def periodic(
        name: int, secs: float, passable: bool, busy: frozenset[int], then: float | None
    ) -> None:
        count = 0

        def idle() -> bool:
            trace.append(("idle", name, count, clock.now_ms()))
            return count not in busy

        def passed() -> float:
            nonlocal count
            count += 1
            trace.append(("passed", name, count, clock.now_ms()))
            return then if then is not None and count % 2 else secs  # time moves at last

        while True:
            if passable:
                await clock.sleep(secs, idle=idle, passed=passed if then is not None else None)
            else:
                await clock.sleep(secs)
            count += 1
            trace.append(("woke", name, count, clock.now_ms()))

    tasks = []
    for name, (secs, passable, busy, then, _) in enumerate(loops):
        tasks.append(asyncio.create_task(periodic(name, secs, passable, busy, then)))
        await asyncio.sleep(0)
    for step, limit in enumerate(limits):
        for name, (*_, cancel_at) in enumerate(loops):
            if cancel_at == step:
                tasks[name].cancel()
        at = clock.release_next(until_ms=None if limit is None else EPOCH_MS + limit)
        trace.append(("release", at, clock.now_ms(), clock.released, clock.passed_over))
        trace.append(("heap", [(d, s) for d, s, f, _ in sorted(clock._sleepers) if not f.done()]))
        for _ in range(4):
            await asyncio.sleep(0)
    await stop_tasks(*tasks)
    return trace


loops = st.lists(
    st.tuples(
        st.sampled_from([0.5, 2.5, 5.0, 7.5, 10.0, 30.0]),
        st.booleans(),
        st.frozensets(st.integers(min_value=0, max_value=12), max_size=4),
        st.none() | st.sampled_from([-1.0, 0.0, 0.0005, 0.0015, 2.5, 12.5]),
        st.none() | st.integers(min_value=0, max_value=10),
    ),
    min_size=1,
    max_size=5,
)
#: ``until_ms`` after the epoch (None: no limit), to the millisecond: ``ms_at``'s rounding counts
limits = st.lists(st.none() | st.integers(min_value=0, max_value=120_000), min_size=1, max_size=12)


@settings(max_examples=examples(300), deadline=None)
@given(loops=loops, limits=limits)
def test_release_next_makes_the_plain_definitions_run(
    loops: list[Loop], limits: list[int | None]
) -> None:
    plain = asyncio.run(_run(_PlainClock(EPOCH_MS), loops, limits))
    written_out = asyncio.run(_run(VirtualClock(EPOCH_MS), loops, limits))
    assert written_out == plain


def test_a_lone_idle_sleeper_is_passed_over_and_a_busy_one_released() -> None:
    """The lone-sleeper path both ways, with the plain definition's trace."""
    example: list[Loop] = [(10.0, True, frozenset({3}), 10.0, None)]
    steps: list[int | None] = [100_000, 100_000, 25_000, None, 100_000]
    plain = asyncio.run(_run(_PlainClock(EPOCH_MS), example, steps))
    written_out = asyncio.run(_run(VirtualClock(EPOCH_MS), example, steps))
    assert written_out == plain
    releases = [t for t in written_out if isinstance(t, tuple) and t[0] == "release"]
    # 10, 20 and 30 passed over (each passed() counts a cycle); busy at the fourth: 40 released
    assert releases[0][1:] == (40.0, EPOCH_MS + 40_000, 1, 3)


def test_the_limit_is_read_as_ms_at_reads_it() -> None:
    """Half milliseconds: at 1.5 ms the next deadline 2.5 ms reads 2 + 1 = 3 ms (``ms_at``), not
    round(2.5) = 2 ms; a limit of 3 ms stops the pass-over there."""
    example: list[Loop] = [(0.0015, True, frozenset(), 0.001, None)]
    steps: list[int | None] = [3, 3, 5, None, 7]
    plain = asyncio.run(_run(_PlainClock(EPOCH_MS), example, steps))
    written_out = asyncio.run(_run(VirtualClock(EPOCH_MS), example, steps))
    assert written_out == plain
    releases = [t for t in written_out if isinstance(t, tuple) and t[0] == "release"]
    assert releases[0][1:] == (0.0015, EPOCH_MS + 2, 0, 1)
