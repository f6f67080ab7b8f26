"""``lesson_item`` (the prompt's lessons, made without validation when their values are of their
fields' types exactly) against ``InsightItem(**values)``: the same values of the same types, in
the same order, the same fields set; values of other types (a str subclass, a bool, a numpy
float, an int score) take validation."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from contract.memory_contract import make_insight
from memory.context import InsightItem
from memory.insight_source import lesson_item
from memory.model import Insight


class _Text(str):
    pass


def _typed(item: InsightItem) -> list[tuple[str, type, Any]]:
    return [(name, type(value), value) for name, value in item.__dict__.items()]


_ODD = st.sampled_from(["none", "text", "ticker", "id", "created", "created_none", "score"])


@given(
    odd=_ODD,
    score=st.one_of(st.floats(allow_nan=False), st.integers(-3, 3)),
    numpy_score=st.booleans(),
    ticker=st.sampled_from([None, "SOL/USDT"]),
)
def test_lesson_item_is_the_validated_item(
    odd: str, score: float, numpy_score: bool, ticker: str | None
) -> None:
    base = make_insight("lesson about overbought entries", ticker=ticker)
    values = dict(base.__dict__)
    if odd == "text":
        values["text"] = _Text(values["text"])
    elif odd == "ticker":
        values["ticker"] = _Text("ETH/USDT")
    elif odd == "id":
        values["insight_id"] = _Text(values["insight_id"])
    elif odd == "created":
        values["created_ms"] = True
    elif odd == "created_none":
        values["created_ms"] = None
    # the store's insights are validated; these odd ones are made as another store might hand out
    insight = Insight.model_construct(**values)
    if numpy_score:
        score = np.float64(score)
    got = lesson_item(insight, score)
    expected = InsightItem(
        text=insight.text,
        score=score,
        ticker=insight.ticker,
        insight_id=insight.insight_id,
        created_ms=insight.created_ms,
    )
    assert _typed(got) == _typed(expected)
    assert got.model_fields_set == expected.model_fields_set
    assert repr(got) == repr(expected)
    assert got.model_dump_json() == expected.model_dump_json()
