"""What model calls cost: per-million-token prices, a daily USD budget and running totals.

The budget resets at 00:00 UTC of the injected clock, so replays and the simulator count days the
way the market data does.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

from agent.decision import Usage
from core.clock import DAY_MS, Clock


class AgentPricing(BaseModel):
    """USD per million tokens of one model (defaults: Claude Sonnet 4.5 list prices). Cache writes
    cost 1.25x input for the 5-minute TTL and 2x for the 1-hour one; cache reads 0.1x."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    input_per_mtok_usd: float = Field(3.0, ge=0.0)
    output_per_mtok_usd: float = Field(15.0, ge=0.0)
    cache_write_per_mtok_usd: float = Field(3.75, ge=0.0)
    cache_write_1h_per_mtok_usd: float = Field(6.0, ge=0.0)
    cache_read_per_mtok_usd: float = Field(0.30, ge=0.0)

    def for_model(self, _model: str) -> AgentPricing:
        """One price for every model (a ``PriceSource``)."""
        return self

    def cost_usd(
        self,
        input_tokens: int,
        output_tokens: int,
        cache_creation_input_tokens: int = 0,
        cache_read_input_tokens: int = 0,
        cache_creation_1h_input_tokens: int = 0,
    ) -> float:
        # input_tokens excludes the cached parts: the API reports the three input kinds separately;
        # cache_creation_input_tokens includes the 1-hour writes, billed at their own price
        one_hour = min(cache_creation_1h_input_tokens, cache_creation_input_tokens)
        return (
            input_tokens * self.input_per_mtok_usd
            + output_tokens * self.output_per_mtok_usd
            + (cache_creation_input_tokens - one_hour) * self.cache_write_per_mtok_usd
            + one_hour * self.cache_write_1h_per_mtok_usd
            + cache_read_input_tokens * self.cache_read_per_mtok_usd
        ) / 1_000_000

    def usage(
        self,
        input_tokens: int,
        output_tokens: int,
        cache_creation_input_tokens: int = 0,
        cache_read_input_tokens: int = 0,
        cache_creation_1h_input_tokens: int = 0,
        model: str | None = None,
    ) -> Usage:
        return Usage(
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cache_creation_input_tokens=cache_creation_input_tokens,
            cache_read_input_tokens=cache_read_input_tokens,
            cost_usd=self.cost_usd(
                input_tokens,
                output_tokens,
                cache_creation_input_tokens,
                cache_read_input_tokens,
                cache_creation_1h_input_tokens,
            ),
            model=model,
        )


class PriceSource(Protocol):
    """Prices by model: ``AgentPricing`` (one price) or ``AgentConfig`` (its table)."""

    def for_model(self, model: str) -> AgentPricing: ...


#: the date the default price table was last read from Anthropic's model pages (first 2025-11-24;
#: 2026-11-26 added Opus 4.6, the failover example, since Opus 4.5 retires on 2027-01-22)
PRICES_AS_OF = "2026-11-26"
_SONNET = AgentPricing()
_OPUS = AgentPricing(
    input_per_mtok_usd=5.0,
    output_per_mtok_usd=25.0,
    cache_write_per_mtok_usd=6.25,
    cache_write_1h_per_mtok_usd=10.0,
    cache_read_per_mtok_usd=0.50,
)
DEFAULT_MODEL_PRICES: dict[str, AgentPricing] = {
    "claude-haiku-4-5": AgentPricing(
        input_per_mtok_usd=1.0,
        output_per_mtok_usd=5.0,
        cache_write_per_mtok_usd=1.25,
        cache_write_1h_per_mtok_usd=2.0,
        cache_read_per_mtok_usd=0.10,
    ),
    "claude-sonnet-4-5": _SONNET,
    "claude-sonnet-4-6": _SONNET,
    "claude-opus-4-5": _OPUS,
    "claude-opus-4-6": _OPUS,
}


class PriceTable(BaseModel):
    """List prices per model id, dated. ``[agent.prices.models."<model>"]`` overrides one; a model
    id with a date suffix (``claude-haiku-4-5-20251001``) takes its family's price."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    as_of: str = PRICES_AS_OF
    models: dict[str, AgentPricing] = Field(default_factory=lambda: dict(DEFAULT_MODEL_PRICES))

    def find(self, model: str) -> AgentPricing | None:
        if model in self.models:
            return self.models[model]
        family = max((m for m in self.models if model.startswith(m + "-")), key=len, default=None)
        return None if family is None else self.models[family]


#: far above any real call (the largest context window is 1M tokens): a count past it is a fault
MAX_TOKENS_PER_CALL = 10_000_000
#: the token counts of one call, as the Messages API names them (the cache ones may be absent)
TOKEN_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
)
_REQUIRED_FIELDS = frozenset({"input_tokens", "output_tokens"})


def usage_problems(counts: dict[str, object]) -> list[str]:
    """Why a usage block reported by the API cannot be billed: each count (``TOKEN_FIELDS`` and
    any other given, e.g. the 1-hour part of the cache writes) must be an integer in
    [0, MAX_TOKENS_PER_CALL] (None only for the optional ones). Empty when it can."""
    problems = []
    for name in dict.fromkeys((*TOKEN_FIELDS, *counts)):
        value = counts.get(name)
        if value is None and name not in _REQUIRED_FIELDS:
            continue
        if type(value) is not int or not 0 <= value <= MAX_TOKENS_PER_CALL:
            problems.append(f"{name}={repr(value)[:40]}")
    return problems


def add_usage(a: Usage | None, b: Usage | None) -> Usage | None:
    if a is None:
        return b
    if b is None:
        return a
    models = [m for m in (a.model or "").split("+") + (b.model or "").split("+") if m]
    return Usage(
        model="+".join(dict.fromkeys(models)) or None,
        input_tokens=a.input_tokens + b.input_tokens,
        output_tokens=a.output_tokens + b.output_tokens,
        cache_creation_input_tokens=a.cache_creation_input_tokens + b.cache_creation_input_tokens,
        cache_read_input_tokens=a.cache_read_input_tokens + b.cache_read_input_tokens,
        cost_usd=a.cost_usd + b.cost_usd,
    )


def utc_day(at_ms: int) -> int:
    """Days since the Unix epoch, UTC."""
    return at_ms // DAY_MS


def days_left_in_month(at_ms: int) -> int:
    """Days from ``at_ms``'s UTC day to the end of its month, that day included."""
    day = datetime.fromtimestamp(at_ms / 1000, UTC).date()
    first_of_next = date(day.year + day.month // 12, day.month % 12 + 1, 1)
    return (first_of_next - day).days


def _month(at_ms: int) -> tuple[int, int]:
    day = datetime.fromtimestamp(at_ms / 1000, UTC)
    return day.year, day.month


class DailyBudget:
    """Spending per UTC day against a limit (None: unlimited).

    ``monthly_usd`` set (``daily_budget_usd = "auto"``): each day's limit is what is left of the
    month's cap divided over the days left in the month, today included, fixed at the day's
    start; so a cheap day leaves more for the next ones. What was spent before the daemon
    started (its journal's) seeds them: ``spent_today_usd`` today's, ``spent_this_month_usd``
    the month's before today, so a restart does not hand out the day's budget again."""

    def __init__(
        self,
        clock: Clock,
        limit_usd: float | None,
        *,
        monthly_usd: float | None = None,
        spent_this_month_usd: float = 0.0,
        spent_today_usd: float = 0.0,
    ) -> None:
        if limit_usd is not None and limit_usd < 0:
            raise ValueError(f"limit_usd must be >= 0, got {limit_usd}")
        self._clock = clock
        self._fixed_limit_usd = limit_usd
        self.monthly_usd = monthly_usd
        now = clock.now_ms()
        self._day = utc_day(now)
        self._month = _month(now)
        self._spent_usd = spent_today_usd
        self._month_before_today_usd = spent_this_month_usd
        self._limit_usd = self._today_limit(now)

    def _today_limit(self, now_ms: int) -> float | None:
        if self.monthly_usd is None:
            return self._fixed_limit_usd
        left = max(0.0, self.monthly_usd - self._month_before_today_usd)
        return left / days_left_in_month(now_ms)

    @property
    def limit_usd(self) -> float | None:
        self._roll()
        return self._limit_usd

    @property
    def spent_today_usd(self) -> float:
        self._roll()
        return self._spent_usd

    def exhausted(self) -> bool:
        limit = self.limit_usd
        return limit is not None and self.spent_today_usd >= limit

    def resets_at_ms(self) -> int:
        """The next 00:00 UTC."""
        return (utc_day(self._clock.now_ms()) + 1) * DAY_MS

    def spend(self, cost_usd: float) -> None:
        if cost_usd < 0:
            raise ValueError(f"cost must be >= 0, got {cost_usd}")
        self._roll()
        self._spent_usd += cost_usd

    def _roll(self) -> None:
        now = self._clock.now_ms()
        today = utc_day(now)
        if today == self._day:
            return
        month = _month(now)
        self._month_before_today_usd = (
            self._month_before_today_usd + self._spent_usd if month == self._month else 0.0
        )
        self._day, self._month = today, month
        self._spent_usd = 0.0
        self._limit_usd = self._today_limit(now)


class UsageTotals(BaseModel):
    """Running totals for the status line."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    calls: int = 0
    failed_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    cost_total_usd: float = 0.0
    cost_today_usd: float = 0.0
