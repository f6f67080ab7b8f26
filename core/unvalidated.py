"""Pydantic models made from fields that are of their types already, without validation."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)
# BaseModel's own slots, set through their descriptors: what ``object.__setattr__`` ends up
# calling, without its lookup by name (a replay makes millions of ticks this way)
_slots = BaseModel.__dict__
_set_dict = _slots["__dict__"].__set__
_set_fields_set = _slots["__pydantic_fields_set__"].__set__
_set_extra = _slots["__pydantic_extra__"].__set__
_set_private = _slots["__pydantic_private__"].__set__
_new = object.__new__


def unvalidated(cls: type[M], fields: dict[str, Any], names: set[str] | None = None) -> M:
    """``cls(**fields)`` for every field given, each of its type already, in containers of its
    own: what ``model_construct`` sets, without its walk over aliases and defaults and without
    the validation that copies each list and dict again (a decision's prompt models cost ~8 us
    that way). Only for models with no validators, serializers, post-init or private attributes
    (``has_nothing_to_run`` says; their tests keep it so).

    ``names``: ``set(fields)`` made once by a caller whose fields are always the same keys in
    the same order (the model gets a copy: copying a set is cheaper than hashing its keys)."""
    made = _new(cls)
    _set_dict(made, fields)
    _set_fields_set(made, set(fields) if names is None else names.copy())
    _set_extra(made, None)
    _set_private(made, None)
    return made


def is_float_map(values: Mapping[Any, Any]) -> bool:
    """Whether ``values`` is a ``dict[str, float]`` field as validation leaves it: every key a
    ``str`` and every value a ``float`` (an int or a bool would be converted, so not as is)."""
    return all(type(k) is str and type(v) is float for k, v in values.items())


def has_nothing_to_run(cls: type[BaseModel]) -> bool:
    """Whether validating ``cls`` runs nothing of the model's own (only its fields' types)."""
    found = cls.__pydantic_decorators__
    return (
        not any(
            (
                found.validators,
                found.field_validators,
                found.root_validators,
                found.model_validators,
                found.field_serializers,
                found.model_serializers,
                found.computed_fields,
            )
        )
        and cls.__pydantic_post_init__ is None
        and cls.__new__ is object.__new__
        and not cls.__private_attributes__
        and cls.model_config.get("extra") == "forbid"
    )


def require_plain(cls: type[BaseModel], fields: frozenset[str]) -> None:
    """Raise at import when ``cls`` is no longer plain typed ``fields`` (a validator, serializer,
    private state or another field set): a module that makes it ``unvalidated`` must validate
    again, and says so before it makes a single one."""
    if not has_nothing_to_run(cls):
        raise TypeError(f"{cls.__name__} runs code when validated: make it validated")
    if frozenset(cls.model_fields) != fields:
        raise TypeError(f"{cls.__name__}'s fields changed ({sorted(cls.model_fields)})")
