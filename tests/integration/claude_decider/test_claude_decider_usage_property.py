"""Any usage block a 200 answer carries, through the real SDK and the decider: it is billed as
the priced counts of a plausible call, or refused as a usage_anomaly with nothing billed; never an
unexpected error, never a cost from counts that make no sense."""

from __future__ import annotations

import asyncio
import math
from typing import Any

from fakes.claude_support import AT_MS, answer, make_decider, snapshot
from fakes.instant_clock import InstantClock
from fakes.messages_api import FakeMessagesApi, json_message
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from property_budget import examples

from agent.budget import AgentPricing

_counts = st.one_of(
    st.integers(-(2**70), 2**70),
    st.integers(0, 20_000),
    st.floats(),
    st.none(),
    st.text(max_size=6),
    st.booleans(),
    st.lists(st.integers(), max_size=2),
)
_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
)
_usages = st.fixed_dictionaries(
    {},
    optional={
        **dict.fromkeys(_FIELDS, _counts),
        "cache_creation": st.fixed_dictionaries(
            {},
            optional={"ephemeral_1h_input_tokens": _counts, "ephemeral_5m_input_tokens": _counts},
        )
        | _counts,
    },
)


async def _decide(usage: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    clock = InstantClock(epoch_ms=AT_MS)
    async with FakeMessagesApi() as api:
        api.script(json_message(answer(), usage=usage))
        decider = make_decider(api.base_url, clock, budget_usd=5.0)
        try:
            decision = await decider.decide(snapshot())
        finally:
            await decider.aclose()
    return decision, decider.status()


def _plausible(value: object, limit: int) -> bool:
    return type(value) is int and 0 <= value <= limit


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_usages)
@example(
    {
        "input_tokens": 1200,
        "output_tokens": 300,
        "cache_creation": {"ephemeral_1h_input_tokens": -(10**7)},
    }
)
@example({"input_tokens": 1200, "output_tokens": 10**6})
def test_any_usage_block_is_billed_as_a_plausible_call_or_refused(usage: dict[str, Any]) -> None:
    decision, status = asyncio.run(_decide(usage))
    kinds = [a["kind"] for a in decision.attempts]
    assert "unexpected_error" not in kinds
    if decision.decided_by == "claude":
        # the two counts every usage has, exactly as sent; the optional cache counts as the SDK
        # read them (its lax model turns "7", 7.0 or false into an int): whole and in range
        assert _plausible(usage.get("input_tokens"), 10_000_000)
        assert _plausible(usage.get("output_tokens"), 2048)  # the request's max_tokens
        billed = decision.usage
        assert billed is not None
        assert (billed.input_tokens, billed.output_tokens) == (
            usage["input_tokens"],
            usage["output_tokens"],
        )
        counts = {name: getattr(billed, name) for name in _FIELDS}
        assert all(_plausible(counts[name], 10_000_000) for name in _FIELDS)
        assert math.isfinite(billed.cost_usd) and billed.cost_usd >= 0.0
        most = AgentPricing(cache_write_per_mtok_usd=6.0)  # every cache write at the 1 h price
        assert billed.cost_usd <= most.cost_usd(**counts) + 1e-9
        assert status["cost_total_usd"] == billed.cost_usd
    else:
        assert kinds == ["usage_anomaly"]
        assert status["cost_total_usd"] == 0.0
