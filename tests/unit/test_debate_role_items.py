"""Each list of a role's answer is checked item by item on arrival (the trader's decisions, the
manager's cuts and next steps, the bull's and bear's risks, the reflection's actions): whatever
the items are, each is kept (valid for its schema, within the length asked for) or dropped with
a note, never the whole answer."""

from __future__ import annotations

import re
from typing import Any

import orjson
from hypothesis import given
from hypothesis import strategies as st

from agent.claude_schema import Note
from agent.debate_config import Role
from agent.debate_roles import (
    MAX_DECISIONS,
    MAX_ITEMS,
    ManagerOutput,
    TraderOutput,
    parse_role_output,
)

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


_TEXT_LISTS: list[tuple[Role, str, dict[str, Any]]] = [
    ("bull", "risks", {"summary": "s"}),
    ("bear", "risks", {"summary": "s"}),
    ("manager", "next_steps", {"risks": "r", "strategy": "s", "size_reductions": []}),
    ("reflection", "actions", {"reflection": "r"}),
]


@given(st.sampled_from(_TEXT_LISTS), st.lists(_item, max_size=12))
def test_each_text_item_of_a_role_is_kept_or_dropped_with_a_note(
    listed: tuple[Role, str, dict[str, Any]], items: list[Any]
) -> None:
    """A risk, a next step or an action that is not text, or one past the 8 asked for, refused
    the role's whole answer: its summary and its other items were lost, and the call paid again
    for its retry."""
    role, field, rest = listed
    output, notes = parse_role_output(role, orjson.dumps({**rest, field: items}).decode())
    texts = [item for item in items if isinstance(item, str)]
    assert getattr(output, field) == texts[:MAX_ITEMS]
    assert sum(_dropped(n) for n in notes) == len(items) - len(getattr(output, field))


@given(st.lists(_item, max_size=8))
def test_decisions_past_the_most_asked_for_are_dropped_with_a_note(more: list[Any]) -> None:
    """A 17th decision (a ticker said twice, say) refused the trader's whole answer."""
    valid = {"action": "HOLD", "position_pct": 0.0, "confidence": 0.5, "rationale": "r"}
    items = [{"ticker": "BTC/USDT", **valid}, *more]  # past the 16 asked for, whatever follows
    decisions = [{"ticker": f"T{n}/USDT", **valid} for n in range(MAX_DECISIONS)] + items
    answer = {
        "decisions": decisions,
        "rationale": "r",
        "confidence": 0.5,
        "next_check_seconds": 900,
        "wake_conditions": [],
    }
    output, notes = parse_role_output("trader", orjson.dumps(answer).decode())
    assert isinstance(output, TraderOutput)
    assert (
        output.decisions
        == TraderOutput.model_validate(answer | {"decisions": decisions[:MAX_DECISIONS]}).decisions
    )
    assert sum(_dropped(n) for n in notes) == len(items)


def _dropped(note: Note) -> int:
    """How many items ``note`` says were dropped."""
    past = re.fullmatch(r"dropped: (\d+) past the \d+ asked for", note.reason)
    return int(past[1]) if past else int(note.reason.startswith("dropped: "))
