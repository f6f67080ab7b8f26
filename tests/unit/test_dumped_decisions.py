"""``dumped_decisions`` (``agent.decision``): the ``DecisionMade`` event's per-ticker decisions taken from the
answer's own JSON dump equal each decision dumped on its own, value for value and type for type,
whatever the decisions (none, several, weights, odd floats); a subclass is dumped on its own."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from property_budget import examples
from snapshot_walks_support import same

from agent.decision import AgentDecision, TradeDecision, dumped_decisions
from broker.port import Action

_unit = st.one_of(st.floats(0.0, 1.0), st.sampled_from([0.0, -0.0, 1.0, 5e-324]))
_trade = st.builds(
    TradeDecision,
    ticker=st.sampled_from(["BTC/USDT", "ETH/USDT", "x"]),
    action=st.sampled_from(list(Action)),
    position_pct=_unit,
    confidence=_unit,
    reasoning=st.text(max_size=8),
    signal_weights=st.dictionaries(
        st.text(max_size=3), st.floats(allow_nan=False, allow_infinity=False), max_size=3
    ),
)


def _separately(decision: AgentDecision) -> tuple[Any, ...]:
    return tuple(d.model_dump(mode="json") for d in decision.decisions)


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(_trade, max_size=4))
def test_the_events_decisions_are_each_decisions_own_dump(trades: list[TradeDecision]) -> None:
    decision = AgentDecision(decisions=tuple(trades), decided_by="fallback")
    got = dumped_decisions(decision, decision.model_dump(mode="json"))
    assert type(got) is tuple
    assert same(list(got), list(_separately(decision)))


class _Odd(TradeDecision):
    note: str = "kept"  # the answer's dump leaves it out (it dumps the declared type)


def test_a_subclass_is_dumped_on_its_own() -> None:
    odd = _Odd(ticker="BTC/USDT", action=Action.HOLD)
    decision = AgentDecision(decisions=(odd,), decided_by="fallback")
    got = dumped_decisions(decision, decision.model_dump(mode="json"))
    assert got == _separately(decision)
    assert got[0]["note"] == "kept"
