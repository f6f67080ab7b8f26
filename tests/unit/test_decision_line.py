"""A decision's line made without its model (``state.decision_line``) is the model's line: the
same keys in the same order, the same values of the same types; a record the model would change
or refuse is left to the model."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from agent.routine import _typed_line
from state.decision_line import _RULES, _rule, decision_line
from state.journal import JournalRecordError, PlainJson, encode_jsonl_record
from state.records import DecisionRecord, FieldShape

FIELDS = tuple(DecisionRecord.model_fields)
NAMES = (*FIELDS, "trading", "newer_field")


class Text(str):
    """A str subclass: the model makes it a str."""


leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=6),
)
json = st.recursive(
    leaves,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=8,
)
objects = st.dictionaries(st.text(max_size=6), json, max_size=4)
plain = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=6),
    ),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=8,
)
plain_objects = st.dictionaries(st.text(max_size=6), plain, max_size=4)
odd = st.one_of(
    st.tuples(st.integers()),
    st.dictionaries(st.integers(), st.integers(), min_size=1, max_size=2),
    st.builds(Text, st.text(max_size=4)),
    objects.map(PlainJson),
    st.lists(objects.map(PlainJson), min_size=1, max_size=2),
    st.dictionaries(st.text(max_size=3), st.tuples(st.integers()), min_size=1, max_size=2),
)
values = st.one_of(json, objects, st.lists(objects, max_size=2), st.lists(st.text()), odd)

valid = st.fixed_dictionaries(
    {
        "decision_id": st.text(max_size=8),
        "at_ms": st.integers(min_value=0),
        "trigger": st.lists(st.text(max_size=8), max_size=3),
    },
    optional={
        "type": st.just("decision"),
        "snapshot_digest": st.text(max_size=8),
        "snapshot": plain_objects.map(PlainJson),
        "decided_by": st.text(max_size=8),
        "raw_decision": plain_objects | plain_objects.map(PlainJson),
        "usage": plain_objects | st.none(),
        "agent": plain_objects,
        "accepted": st.lists(plain_objects, max_size=2),
        "cap_changes": st.lists(plain_objects, max_size=2),
        "cancelled": st.lists(plain_objects, max_size=2),
        "orders": st.lists(plain_objects, max_size=2),
        "gate_update": plain | plain_objects.map(PlainJson),
        "prompt": plain_objects.map(PlainJson),
        "error": st.text(max_size=8),
        "trading": st.text(max_size=8),
    },
)


@st.composite
def records(draw: st.DrawFn) -> dict[str, Any]:
    record = draw(valid)
    record.update(draw(st.dictionaries(st.sampled_from(NAMES), values, max_size=3)))
    for name in draw(st.lists(st.sampled_from(NAMES), max_size=2)):
        record.pop(name, None)
    order = draw(st.permutations(list(record)))
    return {name: record[name] for name in order}


def model_line(record: dict[str, Any]) -> dict[str, Any] | None:
    """The line the model makes (``_typed_line``'s way before the shortcut), None if refused."""
    vouched = {key: value for key, value in record.items() if isinstance(value, PlainJson)}
    try:
        line = DecisionRecord.model_validate({**record, **dict.fromkeys(vouched)}).as_line()
    except ValidationError:
        return None
    line.update(vouched)
    return line


def written(line: dict[str, Any]) -> bytes | str:
    """What a journal writes of ``line``, or why it refuses (an int past 64 bits)."""
    try:
        return encode_jsonl_record(line)
    except JournalRecordError as exc:
        return str(exc)


def typed(value: Any) -> Any:
    """``value`` with every type spelled out (``1 == 1.0 == True``, ``[] == ()``, nan != nan)."""
    if isinstance(value, dict):
        return (type(value), [(typed(k), typed(v)) for k, v in value.items()])
    if isinstance(value, list | tuple):
        return (type(value), [typed(item) for item in value])
    return (type(value), repr(value))


@given(records())
def test_a_line_made_without_the_model_is_the_models_line(record: dict[str, Any]) -> None:
    line = decision_line(record)
    if line is not None:
        want = model_line(record)
        assert want is not None
        assert typed(dict(line)) == typed(want)
        # vouched plain (the journal does not walk it again): what it writes is the model line's
        assert type(line) is PlainJson
        assert written(line) == written(want)


@given(valid)
def test_a_record_as_the_routine_builds_it_takes_the_short_way(record: dict[str, Any]) -> None:
    line = decision_line(record)
    assert line is not None and typed(dict(line)) == typed(model_line(record))
    assert typed(_typed_line(record)) == typed(line)


def test_what_the_model_would_change_or_refuse_goes_the_models_way() -> None:
    base = {"decision_id": "d", "at_ms": 1, "trigger": ["agent_timer"]}
    for change in (
        {"at_ms": True},  # the model keeps a bool for an int? it decides, not the shortcut
        {"trigger": ("agent_timer",)},  # a tuple becomes a list
        {"decision_id": Text("d")},  # a str subclass becomes a str
        {"agent": {"transitions": ("a", "b")}},  # a nested tuple becomes a list
        {"usage": {"cost": float("nan")}},
        {"accepted": None},  # refused: not a list
        {"type": "review"},  # refused: not a decision
        {"decision_id": PlainJson({})},  # refused: None does not stand in for a str
    ):
        assert decision_line({**base, **change}) is None
    assert decision_line({"at_ms": 1, "trigger": []}) is None  # no decision_id


def test_extra_keys_follow_the_fields_and_type_comes_last_when_not_given() -> None:
    record = {"trading": "HALTED", "error": "boom", "trigger": [], "at_ms": 2, "decision_id": "d"}
    line = decision_line(record)
    assert line is not None
    assert list(line) == ["decision_id", "at_ms", "trigger", "error", "trading", "type"]
    assert typed(dict(line)) == typed(model_line(record))


def test_the_rules_follow_the_records_field_shapes() -> None:
    # the table is derived from DecisionRecord's annotations: a field it could not check exactly
    # (two kinds of value) is refused when the module loads, not taken on trust
    assert [name for name, *_ in _RULES] == list(FIELDS)
    required = {name for name, field in DecisionRecord.model_fields.items() if field.is_required()}
    assert {name for name, *_, needed in _RULES if needed} == required
    with pytest.raises(TypeError, match="no single exact type"):
        _rule(FieldShape("either", False, frozenset({str, int}), None))
