"""The decision side's settings: Claude as the decider, its breaker and its daily budget."""

from __future__ import annotations

from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agent.budget import AgentPricing, PriceTable
from agent.debate_config import DebateConfig
from agent.materiality import DeltaConfig
from agent.model_id import ModelId
from agent.tiers import TierConfig


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class AgentConfig(_Section):
    """Claude as the decider. Without ANTHROPIC_API_KEY the rule-based fallback decides."""

    #: "claude": one call per decision; "debate": bull/bear/trader/manager roles (agent.debate)
    decider: Literal["claude", "debate"] = "claude"
    model: ModelId = "claude-sonnet-4-6"
    #: tried in order after ``model`` (or a role's model) is overloaded (429/529), failing (5xx)
    #: or gone (a 404 naming it: retired)
    failover_models: tuple[ModelId, ...] = ()
    debate: DebateConfig = DebateConfig()
    max_tokens: int = Field(2048, ge=256, le=64_000)
    timeout_secs: float = Field(60.0, gt=0)
    base_url: str | None = None  # e.g. a proxy; the SDK's default when unset
    pricing: AgentPricing = AgentPricing()  # USD per million tokens, a model not in `prices`
    prices: PriceTable = PriceTable()  # list prices per model, dated
    # spent -> fallback until the next UTC day; "auto": monthly_budget_usd over the days left
    daily_budget_usd: float | Literal["auto"] | None = Field(None)
    monthly_budget_usd: float | None = Field(None, gt=0)
    max_attempts: int = Field(2, ge=1, le=5)  # per decision, our own retry (the SDK's is off)
    retry_after_cap_secs: float = Field(10.0, ge=0)  # a longer retry-after fails over at once
    breaker_failures: int = Field(3, ge=1)  # consecutive failed decisions that open the breaker
    breaker_open_secs: float = Field(900.0, gt=0)  # then one trial call
    tiers: TierConfig = TierConfig()  # a cheaper model for routine passes and reviews
    prompt_cache_ttl: Literal["5m", "1h"] = "1h"  # the system prompt's cache entry
    compact_snapshot: bool = True  # fewer digits, no explained nulls (the journal keeps all)
    delta: DeltaConfig = DeltaConfig()  # routine passes without a material change: no call

    def for_model(self, model: str) -> AgentPricing:
        """The price of ``model``: the price table's, else ``pricing``."""
        return self.prices.find(model) or self.pricing

    @model_validator(mode="after")
    def _budget(self) -> Self:
        daily = self.daily_budget_usd
        if daily == "auto" and self.monthly_budget_usd is None:
            raise ValueError('daily_budget_usd = "auto" needs monthly_budget_usd')
        if isinstance(daily, float | int) and daily <= 0:
            raise ValueError(f"daily_budget_usd must be > 0, got {daily}")
        return self

    @property
    def budget_text(self) -> str:
        if self.daily_budget_usd == "auto":
            return f"auto: {self.monthly_budget_usd:g} USD a month over the days left"
        return f"{self.daily_budget_usd:g} USD a day" if self.daily_budget_usd else "none"
