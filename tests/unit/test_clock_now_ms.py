"""VirtualClock.now_ms answers a reading at the same seconds again: always the plain formula."""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st
from property_budget import examples

from core.clock import VirtualClock


def plain_ms(clock: VirtualClock) -> int:
    return clock._epoch_ms + round(clock._now_secs * 1000.0)


moves = st.lists(
    st.one_of(
        st.tuples(st.just("advance"), st.floats(0.0, 400.0)),
        st.tuples(st.just("sleep"), st.floats(0.0, 90.0)),
        # written directly (as some tests do): a new object, maybe of an equal value
        st.tuples(st.just("set"), st.floats(0.0, 1e7)),
        st.tuples(st.just("equal"), st.just(0.0)),
        st.tuples(st.just("read"), st.just(0.0)),
    ),
    max_size=40,
)


@settings(max_examples=examples(200), deadline=None)
@given(st.integers(-(2**45), 2**45), moves)
def test_now_ms_is_the_plain_formula_after_every_move(
    epoch_ms: int, script: list[tuple[str, float]]
) -> None:
    async def run() -> None:
        clock = VirtualClock(epoch_ms=epoch_ms)
        for kind, secs in script:
            if kind == "advance":
                await clock.advance(secs)
            elif kind == "sleep":
                sleeper = asyncio.ensure_future(clock.sleep(secs))
                await clock.advance(secs)
                await sleeper
            elif kind == "set":
                clock._now_secs = max(clock._now_secs, secs)
            elif kind == "equal":
                clock._now_secs = float(repr(clock._now_secs))
            assert clock.now_ms() == plain_ms(clock)
            assert clock.now_ms() == plain_ms(clock)  # the memo's answer
            assert clock.ms_at(clock._now_secs + 1.5) == plain_ms(clock) + 1500

    asyncio.run(run())


def test_a_half_millisecond_rounds_as_round_does_on_each_move() -> None:
    clock = VirtualClock(epoch_ms=10)
    for secs in (0.0005, 0.0015, 0.0025, 2.5e-4, 1.0005):
        clock._now_secs = secs
        assert clock.now_ms() == 10 + round(secs * 1000.0)
