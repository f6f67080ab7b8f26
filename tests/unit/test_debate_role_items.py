"""The trader's decisions and the manager's cuts are checked one by one on arrival: whatever the
items are, each is kept (valid for its schema) or dropped with a note, never the whole answer."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given
from hypothesis import strategies as st

from agent.debate_roles import ManagerOutput, TraderOutput, parse_role_output

_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=40),
    st.sampled_from(["BUY", "SELL", "HOLD", "BTC/USDT", "ETH/USDT"]),
)
_item = st.one_of(
    _values,
    st.dictionaries(
        st.sampled_from(["ticker", "action", "position_pct", "confidence", "rationale", "x"]),
        _values,
    ),
)


@given(st.lists(_item, max_size=12))
def test_each_trader_decision_is_kept_or_dropped_with_a_note(items: list[Any]) -> None:
    answer = {
        "decisions": items,
        "rationale": "r",
        "confidence": 0.5,
        "next_check_seconds": 900,
        "wake_conditions": [],
    }
    output, notes = parse_role_output("trader", orjson.dumps(answer).decode())
    assert isinstance(output, TraderOutput)
    assert len(output.decisions) + len(notes) == len(items)
    assert all(n.what == "decision" and n.reason.startswith("dropped: ") for n in notes)


@given(st.lists(_item, max_size=12))
def test_each_size_reduction_is_kept_or_dropped_with_a_note(items: list[Any]) -> None:
    answer = {"risks": "r", "strategy": "s", "next_steps": [], "size_reductions": items}
    output, notes = parse_role_output("manager", orjson.dumps(answer).decode())
    assert isinstance(output, ManagerOutput)
    assert len(output.size_reductions) + len(notes) == len(items)
    assert all(0.0 <= r.position_pct <= 1.0 for r in output.size_reductions)
