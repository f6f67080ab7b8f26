"""Reading the exchange's answer fields: any JSON value gives a number the broker can act on, or a
``MalformedAnswerError`` naming the request and field; never another exception, never NaN."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.exchange_answer import (
    MAX_MAGNITUDE,
    MalformedAnswerError,
    number,
    row,
    rows,
    text,
    whole_number,
)
from core.errors import RetryableError

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=80)
    | st.from_regex(r"-?[0-9]{1,20}(\.[0-9]{1,20})?", fullmatch=True)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=6,
)


@given(json_values)
def test_any_value_is_a_bounded_finite_number_or_refused(value: Any) -> None:
    try:
        parsed = number({"qty": value}, "qty", "positions", at_least=0.0)
    except MalformedAnswerError as exc:
        assert "answer to positions" in str(exc)
        return
    assert math.isfinite(parsed) and 0.0 <= parsed <= MAX_MAGNITUDE
    assert not isinstance(value, bool)


@given(json_values)
def test_any_value_is_a_whole_number_or_refused(value: Any) -> None:
    try:
        parsed = whole_number({"t": value}, "t", "order", default=7)
    except MalformedAnswerError:
        return
    assert isinstance(parsed, int) and parsed >= 0
    assert parsed == 7 or not isinstance(value, bool)


@given(json_values)
def test_any_value_is_rows_or_refused(value: Any) -> None:
    try:
        found = rows(value, "positions")
    except MalformedAnswerError:
        return
    assert all(isinstance(item, dict) for item in found)


@pytest.mark.parametrize(
    ("value", "expected"),
    [("0.010", 0.01), ("-3", -3.0), (12, 12.0), (0.5, 0.5), ("", 1.5), (None, 1.5)],
)
def test_what_binance_sends_is_read(value: object, expected: float) -> None:
    assert number({"x": value}, "x", "account", default=1.5) == expected


@pytest.mark.parametrize(
    "value", ["NaN", "nan", "Infinity", "-inf", "1e3", " 1", "1_0", "\uff11", "0x10", True, [1], {}]
)
def test_what_float_would_read_or_crash_on_is_refused(value: object) -> None:
    with pytest.raises(MalformedAnswerError, match="x is not a number"):
        number({"x": value}, "x", "account")


def test_bounds_and_missing_fields_say_which() -> None:
    with pytest.raises(MalformedAnswerError, match="entryPrice must be > 0, got '0'"):
        number({"entryPrice": "0"}, "entryPrice", "positions", above=0.0)
    with pytest.raises(MalformedAnswerError, match="has no availableBalance"):
        number({}, "availableBalance", "account")
    with pytest.raises(MalformedAnswerError, match="answer to order 7 has no orderId"):
        whole_number({"orderId": ""}, "orderId", "order 7")
    with pytest.raises(MalformedAnswerError, match="symbol is not a non-empty string: ''"):
        text({"symbol": ""}, "symbol", "positions")
    with pytest.raises(MalformedAnswerError, match="is not an object: 'x"):
        row("x" * 500, "account")  # quoted back shortened
    assert issubclass(MalformedAnswerError, RetryableError)  # the caller backs off and asks again
