"""A decision's journal line without its model, when the model would change nothing.

``DecisionRecord.model_validate(record).as_line()`` validates each field and dumps it in JSON
mode: a record whose every value is of its field's exact type and plain JSON (what the decision
routine builds: strings, an int, model dumps) comes out with the same values, in the model's
field order, then the extra keys in the record's order, then ``type`` when the record has none.
``decision_line`` makes that line directly (a decision's validation and dump were ~8 us of the
~13 us its line took); any other record gets None and takes the model's way. The line it makes
is a ``PlainJson``: every value was just checked exact JSON (or is vouched plain), so the journal
writes it without walking it again (that second walk was ~3 us of a decision's line).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from state.journal import PlainJson, is_exact_json
from state.records import DecisionRecord, FieldShape, field_shapes


def _text(value: Any) -> bool:
    return type(value) is str


def _integer(value: Any) -> bool:
    return type(value) is int


def _texts(value: Any) -> bool:
    return type(value) is list and all(type(item) is str for item in value)


def _object(value: Any) -> bool:
    return type(value) is dict and is_exact_json(value)


def _objects(value: Any) -> bool:
    return type(value) is list and all(_object(item) for item in value)


def _decision(value: Any) -> bool:
    return type(value) is str and value == "decision"


_CHECKS: Final[dict[type, Callable[[Any], bool]]] = {str: _text, int: _integer, dict: _object}


def _rule(shape: FieldShape) -> tuple[str, Callable[[Any], bool], bool, bool]:
    """(field, its exact-type check, whether None is valid, required) from the field's shape in
    ``state.records``: the same annotations that let a journal reader skip validation."""
    if shape.types is None:  # the ``type`` literal, or ``Any`` (any plain JSON, None included)
        if shape.name == "type":
            return shape.name, _decision, False, shape.required
        return shape.name, is_exact_json, True, shape.required
    kinds = shape.types - {type(None)}
    if len(kinds) != 1:
        raise TypeError(f"{shape.name}: no single exact type in {sorted(map(str, kinds))}")
    (kind,) = kinds
    nullable = type(None) in shape.types
    if kind is list:
        return shape.name, _texts if shape.items is str else _objects, nullable, shape.required
    return shape.name, _CHECKS[kind], nullable, shape.required


#: (field, check, None valid, required), in DecisionRecord's field order: one loop over them
_RULES: Final = tuple(_rule(shape) for shape in field_shapes(DecisionRecord))
_NAMES: Final = frozenset(name for name, *_ in _RULES)
_MISSING: Final = object()


def decision_line(record: Mapping[str, Any]) -> dict[str, Any] | None:
    """``DecisionRecord``'s line of ``record`` (a ``PlainJson`` value where None is valid goes in
    as it is, as ``_typed_line`` puts it back), or None when the model must decide. The values
    are handed over, not copied: the record's maker does not change them afterwards, and nobody
    changes the line (a ``PlainJson``, vouched plain)."""
    line: dict[str, Any] = PlainJson({})
    get = record.get
    for name, check, nullable, required in _RULES:
        value = get(name, _MISSING)
        if value is _MISSING:
            if required:
                return None
            continue
        if value is None or type(value) is PlainJson:
            if not nullable:
                return None
        elif not check(value):
            return None
        line[name] = value
    if len(line) != len(record):  # extra keys (a newer field), after the fields
        for name, value in record.items():
            if name not in _NAMES:
                if not (type(value) is PlainJson or is_exact_json(value)):
                    return None
                line[name] = value
    if "type" not in line:
        line["type"] = "decision"
    return line
