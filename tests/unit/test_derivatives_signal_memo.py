"""``SignalMemo`` hands the last signal out again only while its inputs are the very same: over
polls that keep, copy, rebuild, change or refill the funding rates (and sometimes bring taker flow
or long/short positioning), each signal is the one ``derivatives_signal(signal_inputs(values))``
computes afresh."""

from __future__ import annotations

import math
import struct
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from property_budget import examples

from derivatives.monitor import SignalMemo, signal_inputs
from derivatives.signal import derivatives_signal

TICKERS = ("BTC/USDT", "ETH/USDT", "SOL/USDT")
rates = st.one_of(
    st.floats(min_value=-0.01, max_value=0.01),
    st.sampled_from([0.0, -0.0, math.nan, math.inf, 1e-4, -1e-4]),
    st.integers(-1, 1),
)


def twin(value: Any) -> Any:
    """An equal rate in another object (the same bits for a float)."""
    if isinstance(value, float):
        return struct.unpack("d", struct.pack("d", value))[0]
    return value


polls = st.lists(
    st.tuples(
        st.sampled_from(["same dict", "copied", "twins", "new", "changed in place", "none"]),
        st.dictionaries(st.sampled_from(TICKERS), rates, max_size=3),
        st.sampled_from([None, {}, {"BTC/USDT": {"buy_sell_ratio": 1.3}}]),
        st.sampled_from([None, {}, {"ETH/USDT": {"zscore": -2.0}}]),
    ),
    min_size=1,
    max_size=30,
)


@settings(max_examples=examples(300), deadline=None)
@given(polls=polls)
def test_each_signal_is_the_one_computed_afresh(
    polls: list[tuple[str, dict[str, Any], Any, Any]],
) -> None:
    memo = SignalMemo()
    funding: dict[str, Any] | None = {}
    for how, fresh, taker, long_short in polls:
        if how == "copied" and funding is not None:
            funding = dict(funding)
        elif how == "twins" and funding is not None:
            funding = {twin(t): twin(r) for t, r in funding.items()}
        elif how == "changed in place" and funding is not None:
            funding.update(fresh)
        elif how == "new":
            funding = fresh
        elif how == "none":
            funding = None
        values = {"funding_rates": funding, "taker_delta": taker, "long_short_ratio": long_short}
        got = memo(values)
        want = derivatives_signal(signal_inputs(values))
        assert got.model_dump_json() == want.model_dump_json()
        assert repr(got) == repr(want)


def test_the_signal_is_taken_again_for_the_same_rates() -> None:
    memo = SignalMemo()
    funding = {"BTC/USDT": 1e-4, "ETH/USDT": -2e-4}
    first = memo({"funding_rates": funding})
    assert memo({"funding_rates": dict(funding)}) is first
    assert memo({"funding_rates": dict(funding), "taker_delta": {}}) is first
    assert memo({"funding_rates": {k: twin(v) for k, v in funding.items()}}) is not first
