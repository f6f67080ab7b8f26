"""A decision's journal line without its model, when the model would change nothing.

``DecisionRecord.model_validate(record).as_line()`` validates each field and dumps it in JSON
mode: a record whose every value is of its field's exact type and plain JSON (what the decision
routine builds: strings, an int, model dumps) comes out with the same values, in the model's
field order, then the extra keys in the record's order, then ``type`` when the record has none.
``decision_line`` makes that line directly (a decision's validation and dump were ~8 us of the
~13 us its line took); any other record gets None and takes the model's way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from state.journal import PlainJson, is_exact_json
from state.records import DecisionRecord


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


#: field -> (its exact-type check, whether None is valid): DecisionRecord's fields in its order
_FIELDS: Final[dict[str, tuple[Callable[[Any], bool], bool]]] = {
    "type": (_decision, False),
    "decision_id": (_text, False),
    "at_ms": (_integer, False),
    "trigger": (_texts, False),
    "snapshot_digest": (_text, True),
    "snapshot": (_object, True),
    "decided_by": (_text, True),
    "decider_reason": (_text, True),
    "raw_decision": (_object, True),
    "usage": (_object, True),
    "agent": (_object, True),
    "accepted": (_objects, False),
    "cap_changes": (_objects, False),
    "cancelled": (_objects, True),
    "skipped": (_objects, True),
    "orders": (_objects, False),
    "gate_update": (is_exact_json, True),
    "memory_saved": (is_exact_json, True),
    "prompt": (_object, True),
    "context_error": (_text, True),
    "error": (_text, True),
}
if tuple(_FIELDS) != tuple(DecisionRecord.model_fields):  # a new field needs its check here
    raise RuntimeError("state.decision_line._FIELDS does not follow DecisionRecord's fields")
#: (field, check, None valid, required), in the model's order: one loop over the fields
_RULES: Final = tuple(
    (name, check, nullable, field.is_required())
    for (name, (check, nullable)), field in zip(
        _FIELDS.items(), DecisionRecord.model_fields.values(), strict=True
    )
)
_MISSING: Final = object()


def decision_line(record: Mapping[str, Any]) -> dict[str, Any] | None:
    """``DecisionRecord``'s line of ``record`` (a ``PlainJson`` value where None is valid goes in
    as it is, as ``_typed_line`` puts it back), or None when the model must decide. The values
    are handed over, not copied: the record's maker does not change them afterwards."""
    line: dict[str, Any] = {}
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
            if name not in _FIELDS:
                if not (type(value) is PlainJson or is_exact_json(value)):
                    return None
                line[name] = value
    if "type" not in line:
        line["type"] = "decision"
    return line
