"""``dated`` makes its ``Dated`` without validation when the values are of their fields' types
exactly: the same model as ``Dated(...)`` validated (values, their types, order, fields set);
an at_ms of another type (a bool, a float) or a numpy instant takes validation."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from memory.context import FUTURE_SLACK_SECS, STALE_AFTER_SECS, Dated, dated

_plain_dated = dated.__wrapped__  # without the lru_cache (it takes 1, 1.0 and True as one key)


def _validated(at_ms: Any, now_ms: Any) -> Dated:
    if at_ms is None:
        return Dated(at_ms=None, age_secs=None, stale=True)
    if (at_ms - now_ms) / 1000 > FUTURE_SLACK_SECS:
        return Dated(at_ms=at_ms, age_secs=None, stale=True)
    age = max(0.0, (now_ms - at_ms) / 1000)
    return Dated(at_ms=at_ms, age_secs=round(age, 1), stale=age > STALE_AFTER_SECS)


def _typed(model: Dated) -> list[tuple[str, type, Any]]:
    return [(k, type(v), v) for k, v in model.__dict__.items()]


@given(
    at_ms=st.one_of(
        st.none(),
        st.integers(0, 2**53),
        st.booleans(),
        st.floats(0, 2e12, allow_nan=False),
    ),
    ahead=st.integers(-(10**7), 10**8),
    numpy_now=st.booleans(),
)
def test_dated_is_the_validated_model(at_ms: Any, ahead: int, numpy_now: bool) -> None:
    now_ms: Any = int(at_ms or 0) + ahead
    if numpy_now:
        now_ms = np.int64(now_ms)
    try:
        expected = _validated(at_ms, now_ms)
    except ValidationError:  # a float with a fraction is no int: both refuse it
        with pytest.raises(ValidationError):
            _plain_dated(at_ms, now_ms)
        return
    got = _plain_dated(at_ms, now_ms)
    assert _typed(got) == _typed(expected)
    assert got.model_fields_set == expected.model_fields_set
    assert repr(got) == repr(expected)
    assert got.model_dump_json() == expected.model_dump_json()
