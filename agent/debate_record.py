"""A debate as the journal line shows it: each role's output, model, usage, fallback and the
memories it was given with their scores, plus the working-memory size and what was written."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from agent.claude_client import NOT_SENT
from agent.claude_schema import Note
from agent.debate_config import Role
from agent.debate_memory import Recalled
from agent.debate_roles import RoleOutput
from agent.decision import Usage


class RoleResult(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    role: Role
    round: int = 0  # bull / bear: 1..bb_rounds
    model: str
    output: RoleOutput
    fell_back: bool
    reason: str = ""  # why it fell back (the last failure's kind)
    usage: Usage | None
    attempts: tuple[dict[str, Any], ...]
    memories: tuple[Recalled, ...]
    text: str  # the output as kept in memory: redacted and cut
    notes: tuple[Note, ...] = ()  # items of the answer dropped on arrival, each with why
    #: the day's budget kept it from being asked, or from the retry its failed answer was worth
    budget_spent: bool = False

    @property
    def asked(self) -> bool:
        """A call went out: neither the budget nor a retired model (``not_sent``) kept it in."""
        return any(a.get("outcome") != NOT_SENT for a in self.attempts)


def role_line(result: RoleResult) -> dict[str, Any]:
    usage = result.usage or Usage()
    return {
        "role": result.role,
        "round": result.round,
        "model": result.model,
        "fell_back": result.fell_back,
        "reason": result.reason,
        "output": result.output.model_dump(mode="json"),
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_read_input_tokens": usage.cache_read_input_tokens,
        "cost_usd": round(usage.cost_usd, 6),
        "tries": len(result.attempts),
        "attempts": list(result.attempts),
        "notes": [n.model_dump(mode="json") for n in result.notes],
        "memories": [
            {
                "id": m.memory_id,
                "text": m.text,
                "by": m.role,
                "kind": m.kind,
                **m.parts.model_dump(mode="json"),
            }
            for m in result.memories
        ],
    }


def per_role_costs(results: Sequence[RoleResult]) -> dict[str, dict[str, float | int]]:
    """Calls, tokens and dollars per role over this decision."""
    table: dict[str, dict[str, float | int]] = {}
    for r in results:
        usage = r.usage or Usage()
        row = table.setdefault(
            r.role, {"calls": 0, "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0}
        )
        row["calls"] += 1
        row["input_tokens"] += usage.input_tokens + usage.cache_read_input_tokens
        row["output_tokens"] += usage.output_tokens
        row["cost_usd"] = round(float(row["cost_usd"]) + usage.cost_usd, 6)
    return table


def debate_record(
    results: Sequence[RoleResult],
    recalled: Mapping[Role, Sequence[Recalled]],
    working_size: int,
    writes: Mapping[str, Any],
    reflections: Sequence[Mapping[str, Any]],
    rounds: int,
) -> dict[str, Any]:
    return {
        "rounds": rounds,
        "roles": [role_line(r) for r in results],
        "fell_back": [r.role for r in results if r.fell_back],
        "costs": per_role_costs(results),
        "memories_used": sum(len(v) for v in recalled.values()),
        "working_memory_size": working_size,
        "memory_writes": dict(writes),
        "reflections": list(reflections),
    }
