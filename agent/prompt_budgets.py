"""``[agent.prompt]``'s budgets: how much of each class of context the prompt may carry.

A config type of its own, light to import: the settings (every ``vigil`` command, the Docker
health check every 30 s among them) need it, not the prompt's assembly and memory reads."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator

#: the classes of context with a budget of their own (``agent.prompt_context.RANK_CLASS``)
CONTEXT_CLASSES = ("policy", "summary", "notes", "insight", "session")


def _default_class_chars() -> dict[str, int]:
    # 3,800 in all, under the 4,000 warning: a full context (24 day summaries, 80 MEMORY.md lines,
    # 15 lessons, 3 tickers' session) is ~13,000 before these and ~3,800 after
    return {"policy": 1000, "summary": 900, "notes": 600, "insight": 800, "session": 500}


class PromptBudgets(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    item_chars: int = Field(300, ge=50)
    context_warn_chars: int = Field(4000, ge=100)
    context_max_chars: int = Field(6000, ge=100)
    snapshot_max_chars: int = Field(16_000, ge=1000)
    #: characters per class of context (policy, summary, notes, insight, session), each trimmed
    #: by its own order (lowest-score insights, oldest summaries, last lines, oldest session
    #: entries) before the 6,000 cap; a class not named here has no budget of its own
    class_chars: dict[str, Annotated[int, Field(ge=0)]] = Field(
        default_factory=_default_class_chars
    )

    @field_validator("class_chars")
    @classmethod
    def _known_classes(cls, value: dict[str, int]) -> dict[str, int]:
        # a misspelt class (``polcy``) was taken and budgeted nothing: the meant one kept its own
        unknown = sorted(set(value) - set(CONTEXT_CLASSES))
        if unknown:
            raise ValueError(f"no class of context {unknown}; the classes: {list(CONTEXT_CLASSES)}")
        return value


__all__ = ["CONTEXT_CLASSES", "PromptBudgets"]
