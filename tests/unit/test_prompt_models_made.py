"""The prompt's models made without pydantic's validation (``core.unvalidated``) are the models
validation makes: equal, the same dumps, the same fields set and field types, still frozen."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fakes.claude_support import snapshot
from hypothesis import given, settings
from property_budget import examples
from pydantic import BaseModel, ValidationError
from test_prompt_assembly import _ctx
from test_prompt_info_json import _info

from agent.prompt_assembly import (
    AssembledPrompt,
    PromptAssembler,
    PromptBudgets,
    PromptInfo,
)
from core.clock import VirtualClock
from core.unvalidated import has_nothing_to_run, unvalidated
from memory.context import AssembledContext, ContextAssembler, InsightItem
from memory.session_store import SessionStore, session_key
from memory.tiers import OrganisationTier, ProjectTier


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


@pytest.mark.parametrize("cls", [PromptInfo, AssembledPrompt, AssembledContext])
def test_the_models_made_unvalidated_have_nothing_validation_would_run(
    cls: type[BaseModel],
) -> None:
    """A validator, serializer, post-init or private attribute added to one fails here:
    ``unvalidated`` would skip it."""
    assert has_nothing_to_run(cls) and cls.model_config.get("frozen")


@settings(max_examples=examples(200), deadline=None)
@given(_info)
def test_an_info_made_is_the_info_validated(info: PromptInfo) -> None:
    fields = _fields(info)
    made = unvalidated(PromptInfo, dict(fields))
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


T0 = 1_740_787_200_000


class _Insights:
    async def top_insights(self, ticker: str, regime: str | None, k: int) -> list[InsightItem]:
        return [
            InsightItem(text=f"{ticker} lesson {i}", score=i / 4, ticker=ticker, created_ms=T0)
            for i in range(k)
        ]


class _Note(str):
    """A person's notes handed over as a str subclass: validation makes them a str."""


@pytest.mark.parametrize("note", [str, _Note])
async def test_an_assembled_context_is_the_context_validated(
    tmp_path: Path, note: type[str]
) -> None:
    """Every tier loaded (caps written as ints, rules, notes, session entries, lessons); notes
    of a str subclass take validation, as before (made unvalidated they would stay one)."""
    (tmp_path / "org.toml").write_text(
        'max_position_pct = 1\nmax_total_exposure_pct = 2\nbanned_tickers = ["DOGE/USDT"]\n'
        'text = "be careful"\n'
    )
    (tmp_path / "MEMORY.md").write_text("# MEMORY\nwatch the weekend.\n")
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "btc.md").write_text('---\ntickers: ["BTC/*"]\n---\nno leverage\n')
    clock = VirtualClock(epoch_ms=T0)
    session = SessionStore(tmp_path / "sessions", clock)
    session.set(session_key("BTC/USDT", "decision"), {"action": "HOLD", "position_pct": 0.0})
    session.set(session_key("ETH/USDT", "analysis", "thesis"), "a thesis")
    assembler = ContextAssembler(
        organisation=OrganisationTier(tmp_path / "org.toml"),
        project=ProjectTier(tmp_path),
        session=session,
        insights=_Insights(),
        person_notes=lambda: note("my note"),
        insights_per_ticker=3,
    )
    for step in range(2):
        ctx = await assembler.assemble(["BTC/USDT", "ETH/USDT"], T0 + step * 300_000, {})
        assert ctx.caps == {"max_position_pct": 1.0, "max_total_exposure_pct": 2.0}
        assert ctx.rules == {"btc": ["no leverage"]} and len(ctx.session) == 2
        assert len(ctx.insights) == 6 and type(ctx.values["person_notes"]) is str
        _same_model(ctx, AssembledContext(**_fields(ctx)))
        with pytest.raises(ValidationError):
            ctx.at_ms = 0  # type: ignore[misc]
