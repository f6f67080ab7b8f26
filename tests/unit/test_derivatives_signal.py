"""DerivativesSignal: hand-computed cases and properties (bounded, monotone in funding)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from derivatives.signal import SignalInputs, derivatives_signal, ticker_score

TANH_1 = 0.7615941559557649  # tanh(1), written out so the cases are checked by hand


def test_funding_alone_at_the_scale_gives_minus_tanh_1_times_035() -> None:
    result = derivatives_signal({"BTC/USDT": SignalInputs(funding_rate=0.0005)})
    assert result.value == pytest.approx(-TANH_1 * 0.35)  # -0.26656
    assert result.inputs_used == {"BTC/USDT": ("funding_rate",)}


def test_taker_ratio_alone() -> None:
    result = derivatives_signal({"BTC/USDT": SignalInputs(taker_ratio=1.5)})
    assert result.value == pytest.approx(TANH_1 * 0.30)  # tanh((1.5-1)*2) * 0.30 = 0.22848


def test_long_short_z_inside_the_dead_band_counts_as_used_but_adds_nothing() -> None:
    result = derivatives_signal({"BTC/USDT": SignalInputs(long_short_z=0.9)})
    assert result.value == 0.0
    assert result.inputs_used == {"BTC/USDT": ("long_short_z",)}


def test_all_three_inputs_sum_and_two_tickers_average() -> None:
    btc = SignalInputs(funding_rate=0.0001, taker_ratio=0.8, long_short_z=2.0)
    eth = SignalInputs(funding_rate=-0.0005)
    # BTC: -tanh(0.2)*0.35 + tanh(-0.4)*0.30 - tanh(0.3)*0.25
    btc_expected = -0.19737532 * 0.35 + -0.37994896 * 0.30 - 0.29131261 * 0.25
    eth_expected = TANH_1 * 0.35
    result = derivatives_signal({"BTC/USDT": btc, "ETH/USDT": eth})
    assert result.per_ticker["BTC/USDT"] == pytest.approx(btc_expected, abs=1e-8)
    assert result.per_ticker["ETH/USDT"] == pytest.approx(eth_expected)
    assert result.value == pytest.approx((btc_expected + eth_expected) / 2, abs=1e-8)


def test_a_ticker_without_inputs_drops_out_of_the_average() -> None:
    result = derivatives_signal(
        {"BTC/USDT": SignalInputs(funding_rate=0.0005), "SOL/USDT": SignalInputs()}
    )
    assert result.value == pytest.approx(-TANH_1 * 0.35)
    assert "SOL/USDT" not in result.per_ticker


def test_no_inputs_at_all_is_none_with_a_reason() -> None:
    result = derivatives_signal({"BTC/USDT": SignalInputs()})
    assert result.value is None
    assert result.reason is not None and "no funding" in result.reason


def test_nan_input_is_treated_as_missing() -> None:
    assert ticker_score(SignalInputs(funding_rate=math.nan)) is None


finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)
optional = st.none() | finite
inputs = st.builds(SignalInputs, funding_rate=optional, taker_ratio=optional, long_short_z=optional)


@given(st.dictionaries(st.sampled_from(["BTC/USDT", "ETH/USDT", "SOL/USDT"]), inputs))
def test_signal_is_always_in_minus_one_to_one(by_ticker: dict[str, SignalInputs]) -> None:
    value = derivatives_signal(by_ticker).value
    assert value is None or -1.0 <= value <= 1.0


@given(
    st.floats(min_value=-0.01, max_value=0.01),
    st.floats(min_value=-0.01, max_value=0.01),
    optional,
    optional,
    inputs,
)
def test_signal_never_rises_when_funding_rises(
    f1: float, f2: float, taker: float | None, z: float | None, other: SignalInputs
) -> None:
    low, high = sorted((f1, f2))

    def at(funding: float) -> float:
        btc = SignalInputs(funding_rate=funding, taker_ratio=taker, long_short_z=z)
        value = derivatives_signal({"BTC/USDT": btc, "ETH/USDT": other}).value
        assert value is not None
        return value

    assert at(high) <= at(low)
