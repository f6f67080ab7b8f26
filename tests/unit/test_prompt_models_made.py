"""The prompt's two models made without pydantic's validation (``prompt_assembly._made``) are the
models validation makes: equal, the same dumps, the same fields set, still frozen."""

from __future__ import annotations

from typing import Any

import pytest
from fakes.claude_support import snapshot
from hypothesis import given, settings
from pydantic import BaseModel, ValidationError
from test_prompt_assembly import _ctx
from test_prompt_info_json import _info

from agent.prompt_assembly import (
    AssembledPrompt,
    PromptAssembler,
    PromptBudgets,
    PromptInfo,
    _made,
)


def _fields(model: BaseModel) -> dict[str, Any]:
    return {name: getattr(model, name) for name in type(model).model_fields}


def _same_model(made: BaseModel, validated: BaseModel) -> None:
    assert type(made) is type(validated)
    assert made == validated
    assert made.model_dump() == validated.model_dump()
    assert made.model_dump_json() == validated.model_dump_json()
    assert made.model_fields_set == validated.model_fields_set
    assert [type(v) for v in _fields(made).values()] == [
        type(v) for v in _fields(validated).values()
    ]


@pytest.mark.parametrize("cls", [PromptInfo, AssembledPrompt])
def test_the_models_made_unvalidated_have_nothing_validation_would_run(
    cls: type[BaseModel],
) -> None:
    """A validator, serializer, post-init or private attribute added to either model fails
    here: ``_made`` would skip it."""
    decorators = cls.__pydantic_decorators__
    assert not any(
        (
            decorators.validators,
            decorators.field_validators,
            decorators.root_validators,
            decorators.model_validators,
            decorators.field_serializers,
            decorators.model_serializers,
            decorators.computed_fields,
        )
    )
    assert cls.__pydantic_post_init__ is None
    assert not cls.__private_attributes__
    assert cls.model_config.get("extra") == "forbid" and cls.model_config.get("frozen")


@settings(max_examples=200, deadline=None)
@given(_info)
def test_an_info_made_is_the_info_validated(info: PromptInfo) -> None:
    fields = _fields(info)
    made = _made(PromptInfo, dict(fields))
    _same_model(made, PromptInfo(**fields))
    assert made.as_json() == info.as_json()
    with pytest.raises(ValidationError):
        made.hash = "changed"  # type: ignore[misc]


@pytest.mark.parametrize(("insights", "summaries"), [(0, 0), (2, 2), (40, 30)])
def test_a_built_prompt_is_the_prompt_validated(insights: int, summaries: int) -> None:
    """Every field ``build`` gives is of its type already: validating them changes nothing."""
    for budgets in (PromptBudgets(), PromptBudgets(class_chars={})):
        prompt = PromptAssembler(None, budgets).build(
            snapshot().as_sent(), _ctx(n_insights=insights, n_summaries=summaries)
        )
        validated = AssembledPrompt(
            **{**_fields(prompt), "info": PromptInfo(**_fields(prompt.info))}
        )
        _same_model(prompt.info, validated.info)
        _same_model(prompt, validated)
        with pytest.raises(ValidationError):
            prompt.texts = {}  # type: ignore[misc]
