"""The fake Messages API's usage model: tokens from the request, cache reads and writes as the
real API reports them (minimum length per model, TTLs, longest live prefix), and the per-model,
dated price table that bills them."""

from __future__ import annotations

from typing import Any

import pytest
from fakes.usage_model import ONE_HOUR_MS, PromptCache, count_tokens

from agent.budget import PriceTable

MINUTE_MS = 60_000
LONG = "x" * 10_000  # about 2,858 tokens: above Sonnet's 1,024 minimum, below Haiku 4.5's 4,096


def request(model: str, user: str, ttl: str | None = None) -> dict[str, Any]:
    control: dict[str, Any] = {"type": "ephemeral"} | ({"ttl": ttl} if ttl else {})
    return {
        "model": model,
        "system": [{"type": "text", "text": LONG, "cache_control": control}],
        "messages": [{"role": "user", "content": user}],
    }


class Clock:
    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


def test_the_first_call_writes_the_prefix_and_the_next_reads_it_while_alive() -> None:
    clock = Clock()
    cache = PromptCache(clock)
    first = cache.usage(request("claude-sonnet-4-6", "snapshot one"), "answer")
    system_tokens = count_tokens(LONG) + 4
    assert first["cache_creation_input_tokens"] == system_tokens
    assert first["cache_read_input_tokens"] == 0
    assert first["input_tokens"] == count_tokens("snapshot one") + 4
    assert first["output_tokens"] == count_tokens("answer")
    clock.now = 4 * MINUTE_MS
    second = cache.usage(request("claude-sonnet-4-6", "snapshot two!"), "answer")
    assert (second["cache_read_input_tokens"], second["cache_creation_input_tokens"]) == (
        system_tokens,
        0,
    )
    clock.now += 6 * MINUTE_MS  # 5-minute TTL, refreshed by the read: gone 6 minutes later
    third = cache.usage(request("claude-sonnet-4-6", "snapshot three"), "answer")
    assert third["cache_read_input_tokens"] == 0
    assert third["cache_creation_input_tokens"] == system_tokens


def test_a_one_hour_ttl_survives_a_15_minute_gap_and_is_reported_as_such() -> None:
    clock = Clock()
    cache = PromptCache(clock)
    first = cache.usage(request("claude-sonnet-4-6", "a", ttl="1h"), "")
    assert (
        first["cache_creation"]["ephemeral_1h_input_tokens"] == first["cache_creation_input_tokens"]
    )
    clock.now = 15 * MINUTE_MS
    assert cache.usage(request("claude-sonnet-4-6", "b", ttl="1h"), "")["cache_read_input_tokens"]
    clock.now += ONE_HOUR_MS + 1
    assert not cache.usage(request("claude-sonnet-4-6", "c", ttl="1h"), "")[
        "cache_read_input_tokens"
    ]


def test_a_prefix_under_the_models_minimum_is_never_cached() -> None:
    cache = PromptCache(Clock())
    for _ in range(2):
        usage = cache.usage(request("claude-haiku-4-5", "snapshot"), "")
        assert usage["cache_creation_input_tokens"] == usage["cache_read_input_tokens"] == 0
        assert usage["input_tokens"] > count_tokens(LONG)


def test_models_do_not_share_cache_entries() -> None:
    cache = PromptCache(Clock())
    cache.usage(request("claude-sonnet-4-6", "a"), "")
    assert cache.usage(request("claude-opus-4-1", "a"), "")["cache_read_input_tokens"] == 0


def test_the_price_table_is_dated_finds_families_and_bills_one_hour_writes_at_2x() -> None:
    table = PriceTable()
    assert table.as_of
    haiku = table.find("claude-haiku-4-5-20251001")
    assert haiku is not None and haiku.input_per_mtok_usd == 1.0
    assert table.find("gpt-5") is None
    sonnet = table.find("claude-sonnet-4-6")
    assert sonnet is not None
    five_min = sonnet.cost_usd(0, 0, cache_creation_input_tokens=1_000_000)
    one_hour = sonnet.cost_usd(
        0, 0, cache_creation_input_tokens=1_000_000, cache_creation_1h_input_tokens=1_000_000
    )
    assert (five_min, one_hour) == pytest.approx((3.75, 6.0))
