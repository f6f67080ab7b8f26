"""TradeDecision's finite-weights check (one sum, then a look at each weight only when the sum is
not finite) accepts and refuses exactly what a check of each weight does, naming the same ones."""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from pydantic import ValidationError

from agent.decision import TradeDecision
from broker.port import Action

weights = st.dictionaries(
    st.sampled_from(["rsi", "momentum", "bollinger", "derivatives", "funding"]),
    st.one_of(
        st.floats(allow_nan=True, allow_infinity=True),
        st.sampled_from([1e308, -1e308, math.inf, -math.inf, math.nan, 0.0, -0.0]),
    ),
)


@given(weights)
@example({"rsi": 1e308, "momentum": 1e308})  # finite weights whose sum overflows
@example({"rsi": math.inf, "momentum": -math.inf})  # a sum of NaN
@example({"rsi": math.nan})
def test_the_summed_check_is_the_check_of_each_weight(given_weights: dict[str, float]) -> None:
    bad = [name for name, value in given_weights.items() if not math.isfinite(value)]
    if not bad:
        decision = TradeDecision(
            ticker="BTC/USDT", action=Action.HOLD, signal_weights=given_weights
        )
        assert decision.signal_weights == given_weights
        return
    with pytest.raises(ValidationError, match=re.escape(f"non-finite signal weights: {bad}")):
        TradeDecision(ticker="BTC/USDT", action=Action.HOLD, signal_weights=given_weights)
