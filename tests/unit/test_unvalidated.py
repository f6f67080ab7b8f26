"""``core.unvalidated.require_plain``: the import-time guard of the models made unvalidated
refuses a model that would run code when validated, and one whose fields changed."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ConfigDict, field_validator

from core.unvalidated import is_float_map, require_plain, unvalidated


class Plain(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    a: int
    b: str


class Checked(Plain):
    @field_validator("a")
    @classmethod
    def _positive(cls, value: int) -> int:
        return abs(value)


def test_a_plain_model_with_its_fields_passes_and_is_made_as_validated() -> None:
    require_plain(Plain, frozenset({"a", "b"}))
    made = unvalidated(Plain, {"a": 1, "b": "x"})
    assert made == Plain(a=1, b="x") and made.model_fields_set == {"a", "b"}


def test_given_names_the_model_gets_its_own_copy_of_them() -> None:
    names = {"a", "b"}
    made = unvalidated(Plain, {"a": 1, "b": "x"}, names)
    assert made == Plain(a=1, b="x") and made.model_fields_set == names
    assert made.model_fields_set is not names and type(made.model_fields_set) is set
    made.model_copy(update={"a": 2}).model_fields_set.add("c")
    assert names == {"a", "b"}


def test_a_model_with_a_validator_is_refused() -> None:
    with pytest.raises(TypeError, match="runs code when validated"):
        require_plain(Checked, frozenset({"a", "b"}))


def test_a_model_whose_fields_changed_is_refused() -> None:
    with pytest.raises(TypeError, match="fields changed"):
        require_plain(Plain, frozenset({"a"}))


class Constructed(Plain):
    def __new__(cls, *args: object, **kwargs: object) -> Constructed:
        return super().__new__(cls)


def test_a_model_with_its_own_new_is_refused() -> None:
    """``unvalidated`` makes the instance with ``object.__new__``: a model's own ``__new__``
    would be skipped, so it takes validation."""
    with pytest.raises(TypeError, match="runs code when validated"):
        require_plain(Constructed, frozenset({"a", "b"}))


def test_made_unvalidated_has_the_validated_slots_dumps_and_copies() -> None:
    made = unvalidated(Plain, {"a": 1, "b": "x"})
    validated = Plain(a=1, b="x")
    assert made.__dict__ == validated.__dict__ and list(made.__dict__) == ["a", "b"]
    assert made.__pydantic_extra__ is None and made.__pydantic_private__ is None
    assert made.model_dump_json() == validated.model_dump_json()
    assert made.model_copy(update={"a": 2}) == Plain(a=2, b="x")
    assert made.model_fields_set is not unvalidated(Plain, {"a": 1, "b": "x"}).model_fields_set


def test_a_float_map_is_str_keys_and_float_values_only() -> None:
    assert is_float_map({}) and is_float_map({"rsi": 0.5, "macd": -1.0})
    assert not is_float_map({"rsi": 1})  # validation would make it 1.0
    assert not is_float_map({"rsi": True})
    assert not is_float_map({1: 0.5})
