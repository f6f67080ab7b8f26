"""The debate decider's settings (``[agent.debate]``, env ``VIGIL_AGENT__DEBATE__FIELD``).

Names follow the seed (multi-agent debate with FinMem memory): ``bb_rounds``, ``working_mem_max``,
``memory_store_manager_only``, ``memory_reflection_role_weight``, ``rollup_count``,
``llm_max_retries``. Each role has its own model, output budget and retrieval weight.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from agent.model_id import ModelId

Role = Literal["bull", "bear", "trader", "manager", "reflection"]
ROLES: tuple[Role, ...] = ("bull", "bear", "trader", "manager", "reflection")


class RoleConfig(BaseModel):
    """One role's model call. ``model`` None: the agent's model (``[agent] model``).

    No temperature: the Messages API version the SDK speaks (2026-10-21, anthropic 2.x) removed
    the sampling parameters (a request with one is a 400), so roles differ by model and prompt."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: ModelId | None = None
    max_tokens: int = Field(700, ge=128, le=8000)
    #: multiplies the similarity of a memory this role retrieves (FinMem's role weight); 0..3
    memory_weight: float = Field(1.0, ge=0.0, le=3.0)


def _default_roles() -> dict[Role, RoleConfig]:
    # bull/bear argue in bulk: the cheaper model; trader and manager decide: the agent's model
    cheap = "claude-haiku-4-5"
    return {
        "bull": RoleConfig(model=cheap, max_tokens=500, memory_weight=1.0),
        "bear": RoleConfig(model=cheap, max_tokens=500, memory_weight=1.0),
        "trader": RoleConfig(max_tokens=1500, memory_weight=1.2),
        "manager": RoleConfig(max_tokens=800, memory_weight=1.5),
        "reflection": RoleConfig(model=cheap, max_tokens=400, memory_weight=1.0),
    }


class DebateConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    #: bull/bear exchanges before the trader decides; 1..5
    bb_rounds: int = Field(2, ge=1, le=5)
    #: role outputs kept in the working memory every role sees; 0..50
    working_mem_max: int = Field(8, ge=0, le=50)
    #: true: only the manager's reports (and reflections) go to long-term memory
    memory_store_manager_only: bool = False
    #: the salience a reflection is written with (high: lessons outrank opinions)
    memory_reflection_role_weight: float = Field(0.9, ge=0.0, le=1.0)
    #: manager reports rolled up into one summary; 2..50
    rollup_count: int = Field(5, ge=2, le=50)
    #: tries per role call before that role's fallback answer; 1..5
    llm_max_retries: int = Field(2, ge=1, le=5)
    #: memories each role retrieves per decision; 0..10 (0: none)
    memory_k: int = Field(3, ge=0, le=10)
    #: characters of one role output kept in working memory and long-term memory
    max_output_chars: int = Field(600, ge=100, le=4000)
    roles: dict[Role, RoleConfig] = Field(default_factory=_default_roles)

    def role(self, role: Role) -> RoleConfig:
        return self.roles.get(role) or _default_roles()[role]

    def calls_per_decision(self) -> int:
        """Model calls of one debate: bull + bear per round, the trader, the manager."""
        return 2 * self.bb_rounds + 2
