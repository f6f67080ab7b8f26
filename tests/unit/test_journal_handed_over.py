"""``plain_or_as_is``: a decision's JSON dumps handed to its line as ``PlainJson`` once checked
plain. Whatever the value (NaN, infinities, subclasses, models, non-string keys, tuples), the
journal writes the line it wrote for the value as it was, or fails it the same way."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from property_budget import examples
from test_snapshot_walks import _Float, _json, _Str, _values

from agent.routine import _typed_line
from state.journal import JournalRecordError, PlainJson, encode_jsonl_record, plain_or_as_is

_HANDED_OVER = ("raw_decision", "gate_update")


def _written(record: dict[str, Any]) -> tuple[str, Any]:
    try:
        return "line", encode_jsonl_record(_typed_line(record))
    except JournalRecordError as exc:
        return "refused", str(exc)
    except Exception as exc:  # the model's own dump may refuse a value (a mappingproxy)
        return type(exc).__name__, str(exc)


def _record(**fields: Any) -> dict[str, Any]:
    return {"type": "decision", "decision_id": "d1-1", "at_ms": 1, "trigger": ["t"], **fields}


@settings(max_examples=examples(400), deadline=None)
@given(st.one_of(_values, _json), st.sampled_from(_HANDED_OVER))
def test_a_value_handed_over_writes_what_it_wrote_as_it_was(value: Any, key: str) -> None:
    assert _written(_record(**{key: plain_or_as_is(value)})) == _written(_record(**{key: value}))


def test_only_a_plain_dict_is_handed_over() -> None:
    plain = {"a": [1, 2.5, None, True, "x", {"b": -0.0}]}
    assert type(plain_or_as_is(plain)) is PlainJson
    assert plain_or_as_is(plain) == plain
    for odd in (
        {"a": float("nan")},
        {"a": [float("inf")]},
        {1: "a"},
        {"a": {2: "b"}},
        [1, 2],
        "text",
        None,
        PlainJson({"a": 1}),  # a subclass: not taken for a plain dict
        {"a": _Float(1.0)},
        {"a": _Str("x")},
        {"a": (1, 2)},
    ):
        assert plain_or_as_is(odd) is odd


def test_a_decision_with_a_nan_or_a_subclass_is_written_as_before() -> None:
    """Not handed over: the record's model writes a NaN in a decision as null, a float subclass
    as a float (orjson, handed them, would refuse the one and write the other as null)."""
    for raw in (
        {"decisions": [{"confidence": float("nan")}]},
        {"decisions": [{"confidence": _Float(0.5)}]},
        {"decisions": ({"confidence": 0.5},)},
    ):
        assert plain_or_as_is(raw) is raw
        assert _written(_record(raw_decision=plain_or_as_is(raw)))[0] == "line"
