"""``CostBook.add`` over any JSON a journal line may hold where usage, tries and trigger go: the
line is summed or left out with why, never an exception or a figure that is not finite."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from agent.cost_accounting import USAGE_TOKEN_FIELDS, CostBook

AT_MS = 1_756_771_200_000
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=3),
    lambda inner: (
        st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=3), inner, max_size=2)
    ),
    max_leaves=4,
)
USAGE = st.dictionaries(st.sampled_from([*USAGE_TOKEN_FIELDS, "cost_usd", "model"]), JSON) | JSON


@given(
    usage=USAGE,
    try_usage=USAGE,
    attempts=st.none() | JSON,
    raw=st.none() | JSON,
    trigger=st.none() | JSON,
)
def test_any_usage_is_summed_or_left_out_with_why(
    usage: Any, try_usage: Any, attempts: Any, raw: Any, trigger: Any
) -> None:
    book = CostBook()
    lines = [
        {"type": "decision", "at_ms": AT_MS, "trigger": trigger, "usage": usage,
         "raw_decision": raw if raw is not None else {"attempts": [{"usage": try_usage}]}},
        {"type": "review", "at_ms": AT_MS, "usage": usage,
         "attempts": attempts if attempts is not None else [{"usage": try_usage}]},
    ]  # fmt: skip
    summed = sum(book.add(line) is None for line in lines)
    total = book.day(AT_MS // 86_400_000).total
    assert total.decisions == summed
    figures = [total.cost_usd, *total.model_dump(exclude={"name", "cache_share"}).values()]
    assert all(math.isfinite(f) and f >= 0 for f in figures)
