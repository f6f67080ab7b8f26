"""AgentPricing cost, usage sums and the daily USD budget that resets at 00:00 UTC."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.budget import AgentPricing, DailyBudget, add_usage, days_left_in_month
from agent.config import AgentConfig
from agent.decision import Usage
from core.clock import DAY_MS, VirtualClock

MIDNIGHT_MS = 1_743_984_000_000  # 2025-04-07 00:00 UTC


def test_cost_uses_the_four_per_million_prices() -> None:
    pricing = AgentPricing(
        input_per_mtok_usd=3.0,
        output_per_mtok_usd=15.0,
        cache_write_per_mtok_usd=3.75,
        cache_read_per_mtok_usd=0.30,
    )
    cost = pricing.cost_usd(1_000_000, 100_000, 200_000, 2_000_000)
    assert cost == pytest.approx(3.0 + 1.5 + 0.75 + 0.60)


tokens = st.integers(min_value=0, max_value=10**7)


@given(tokens, tokens, tokens, tokens, tokens, tokens, tokens, tokens)
def test_summed_usage_costs_what_its_parts_cost(
    a: int, b: int, c: int, d: int, e: int, f: int, g: int, h: int
) -> None:
    pricing = AgentPricing()
    total = add_usage(pricing.usage(a, b, c, d), pricing.usage(e, f, g, h))
    assert total is not None
    assert total.cost_usd == pytest.approx(pricing.cost_usd(a + e, b + f, c + g, d + h))
    assert (total.input_tokens, total.cache_read_input_tokens) == (a + e, d + h)


def test_adding_none_keeps_the_other() -> None:
    u = Usage(input_tokens=5)
    assert add_usage(None, u) is u and add_usage(u, None) is u and add_usage(None, None) is None


async def test_budget_is_exhausted_at_the_limit_until_the_next_utc_day() -> None:
    clock = VirtualClock(MIDNIGHT_MS + 23 * 3_600_000)  # 23:00 UTC
    budget = DailyBudget(clock, limit_usd=1.0)
    budget.spend(0.6)
    assert not budget.exhausted()
    budget.spend(0.4)
    assert budget.exhausted() and budget.spent_today_usd == pytest.approx(1.0)
    assert budget.resets_at_ms() == MIDNIGHT_MS + DAY_MS
    await clock.advance(3599)
    assert budget.exhausted()
    await clock.advance(1)
    assert not budget.exhausted() and budget.spent_today_usd == 0.0


def test_no_limit_is_never_exhausted_and_negative_spend_is_refused() -> None:
    budget = DailyBudget(VirtualClock(MIDNIGHT_MS), limit_usd=None)
    budget.spend(1e6)
    assert not budget.exhausted()
    with pytest.raises(ValueError):
        budget.spend(-1.0)
    with pytest.raises(ValueError):
        DailyBudget(VirtualClock(), limit_usd=-1.0)


SEPT_28_MS = 1_759_017_600_000  # 2025-09-28 00:00 UTC: 3 days left in September, today included


def test_days_left_in_month_counts_today() -> None:
    assert days_left_in_month(SEPT_28_MS) == 3
    assert days_left_in_month(SEPT_28_MS + 3 * DAY_MS) == 31  # October 1
    assert days_left_in_month(1_767_139_200_000) == 1  # 2025-12-31: December rolls to January


async def test_an_auto_budget_divides_what_is_left_of_the_month_over_the_days_left() -> None:
    clock = VirtualClock(SEPT_28_MS)
    budget = DailyBudget(clock, None, monthly_usd=30.0, spent_this_month_usd=21.0)
    assert budget.limit_usd == pytest.approx(3.0)  # (30 - 21) / 3 days
    budget.spend(1.0)  # a cheap day leaves more for the next ones
    assert not budget.exhausted()
    await clock.advance(86_400)
    assert budget.limit_usd == pytest.approx(4.0)  # (30 - 22) / 2 days
    budget.spend(4.0)
    assert budget.exhausted()
    await clock.advance(86_400)
    assert budget.limit_usd == pytest.approx(4.0)  # (30 - 26) / 1 day
    budget.spend(4.0)
    await clock.advance(86_400)  # October: a new month, the whole cap over 31 days
    assert budget.limit_usd == pytest.approx(30.0 / 31)
    assert budget.spent_today_usd == 0.0


def test_an_overspent_month_leaves_a_zero_limit_not_a_negative_one() -> None:
    budget = DailyBudget(VirtualClock(SEPT_28_MS), None, monthly_usd=10.0, spent_this_month_usd=12)
    assert budget.limit_usd == 0.0 and budget.exhausted()


def test_auto_needs_a_monthly_cap() -> None:
    with pytest.raises(ValueError, match="monthly_budget_usd"):
        AgentConfig(daily_budget_usd="auto")
    assert AgentConfig(daily_budget_usd="auto", monthly_budget_usd=30).budget_text.startswith(
        "auto"
    )
    with pytest.raises(ValueError, match="> 0"):
        AgentConfig(daily_budget_usd=0)
