"""UsageLedger's totals dump (the journal line's agent status) against its model's dump."""

from __future__ import annotations

import asyncio

from hypothesis import given
from hypothesis import strategies as st

from agent.budget import DailyBudget
from agent.claude import UsageLedger
from agent.claude_client import Attempt
from agent.decision import Usage
from core.clock import VirtualClock

MIDNIGHT_MS = 1_743_984_000_000  # 2025-04-07 00:00 UTC

usages = st.builds(
    Usage,
    input_tokens=st.integers(0, 10**7),
    output_tokens=st.integers(0, 10**6),
    cache_creation_input_tokens=st.integers(0, 10**6),
    cache_read_input_tokens=st.integers(0, 10**7),
    cost_usd=st.one_of(st.integers(0, 3), st.floats(0.0, 5.0)),
    model=st.sampled_from([None, "opus", "sonnet"]),
)
# a call: its tries' usages (None: a try that billed nothing), whether it failed, hours after
calls = st.tuples(
    st.lists(st.one_of(st.none(), usages), max_size=3), st.booleans(), st.integers(0, 30)
)


def _attempt(number: int, usage: Usage | None) -> Attempt:
    return Attempt(attempt=number, outcome="ok" if usage else "failed", usage=usage)


@given(st.lists(calls, max_size=6), st.one_of(st.none(), st.floats(0.0, 10.0)))
def test_totals_dump_is_the_totals_models_dump(
    made: list[tuple[list[Usage | None], bool, int]], limit: float | None
) -> None:
    """The same keys in the same order, equal values of the same types, before any call, after
    calls with and without usage, and across UTC days (today's spend rolls over)."""
    clock = VirtualClock(epoch_ms=MIDNIGHT_MS)
    ledger = UsageLedger(DailyBudget(clock, limit))
    for tries, failed, hours in [([], False, 0), *made]:
        asyncio.run(clock.advance(hours * 3_600.0))
        if tries:
            ledger.record([_attempt(i, u) for i, u in enumerate(tries)], failed)
        want = ledger.totals().model_dump()
        got = ledger.totals_dump()
        assert list(got.items()) == list(want.items())
        assert [type(v) for v in got.values()] == [type(v) for v in want.values()]
