"""A lesson the snapshot's ``historical_insights`` carries is not repeated in the context block."""

from __future__ import annotations

from typing import Any

from fakes.claude_support import snapshot
from hypothesis import given
from hypothesis import strategies as st

from agent.prompt_assembly import PromptAssembler, PromptBudgets, without_lessons_in
from agent.snapshot import sent_json_bytes
from memory.context import AssembledContext, InsightItem

T0 = 1_743_984_000_000


def _ctx(ids: list[str]) -> AssembledContext:
    return AssembledContext(
        at_ms=T0,
        values={},
        insights=[
            InsightItem(text=f"lesson {i}: wait for the retest", score=0.5, insight_id=i)
            for i in ids
        ],
    )


def _sent(ids: list[str], extra: dict[str, Any] | None = None) -> dict[str, Any]:
    sent = snapshot().as_sent()
    sent["historical_insights"] = [
        {"kind": "posterior", "ticker": "BTC/USDT", "wins": 2},  # no id: not a lesson
        *(
            {"kind": "insight", "id": i, "text": f"lesson {i}: wait for the retest", "score": 0.5}
            for i in ids
        ),
    ]
    return {**sent, **(extra or {})}


def _lesson_lines(prompt_text: str) -> list[str]:
    return [line for line in prompt_text.splitlines() if line.startswith("Lesson (")]


def test_a_lesson_in_the_snapshot_is_not_repeated_in_the_context() -> None:
    prompt = PromptAssembler(None).build(_sent(["i-shown"]), _ctx(["i-shown", "i-other"]))
    context = "\n".join(block["text"] for block in prompt.user[:-1])
    assert _lesson_lines(context) == [
        "Lesson (any, score 0.50): lesson i-other: wait for the retest"
    ]
    assert '"id":"i-shown"' in prompt.user[-1]["text"]  # the snapshot still holds it


def test_a_lesson_stays_in_the_context_when_the_snapshot_budget_trimmed_the_insights() -> None:
    sent = _sent(["i-shown"], {"news_summary": "x" * 4000})
    bare = {**sent, "news_summary": None, "historical_insights": None, "unavailable": {}}
    # room for the snapshot without news and insights (and its reasons), not with the insights
    budgets = PromptBudgets(snapshot_max_chars=len(sent_json_bytes(bare)) + 150)
    prompt = PromptAssembler(None, budgets).build(sent, _ctx(["i-shown"]))
    assert "snapshot:historical_insights" in prompt.info.trimmed
    context = "\n".join(block["text"] for block in prompt.user[:-1])
    assert len(_lesson_lines(context)) == 1


def test_nothing_shown_twice_returns_the_context_itself() -> None:
    ctx = _ctx(["i-a"])
    assert without_lessons_in(ctx, _sent(["i-b"])) is ctx
    assert without_lessons_in(ctx, {"historical_insights": None}) is ctx


@given(
    in_context=st.lists(st.sampled_from("abcdefgh"), unique=True, max_size=8),
    in_snapshot=st.lists(st.sampled_from("abcdefgh"), unique=True, max_size=8),
)
def test_every_lesson_is_in_exactly_one_place(
    in_context: list[str], in_snapshot: list[str]
) -> None:
    ctx = _ctx(in_context)
    kept = without_lessons_in(ctx, _sent(in_snapshot))
    kept_ids = [i.insight_id for i in kept.insights]
    assert kept_ids == [i for i in in_context if i not in in_snapshot]  # order kept
    assert set(kept_ids).isdisjoint(in_snapshot)
    assert set(kept_ids) | set(in_snapshot) >= set(in_context)  # none lost
    assert kept.model_dump(exclude={"insights"}) == ctx.model_dump(exclude={"insights"})
