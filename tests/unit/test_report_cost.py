"""The report's model-call figures: per gate layer, per model (from each try), per decider."""

from __future__ import annotations

from typing import Any

import pytest

from report.cost import cost_summary, layer_of


def usage(model: str, inp: int, read: int, out: int, usd: float) -> dict[str, Any]:
    return {
        "model": model,
        "input_tokens": inp,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": read,
        "output_tokens": out,
        "cost_usd": usd,
    }


def test_layers_take_the_most_demanding_reason() -> None:
    assert layer_of(["candle_close:BTC/USDT:15m", "anomaly:BTC/USDT:z=2.1"]) == "anomaly"
    assert layer_of(["candle_close:BTC/USDT:15m", "agent_timer"]) == "agent_timer"
    assert layer_of(["watchdog_no_market_data"]) == "watchdog"


def test_calls_tokens_cache_share_and_dollars_per_layer_model_and_decider() -> None:
    haiku = usage("claude-haiku-4-5", 3000, 0, 400, 0.005)
    sonnet = usage("claude-sonnet-4-6", 1000, 3000, 400, 0.01)
    records = [
        {
            "type": "decision",
            "at_ms": 0,
            "trigger": ["candle_close:BTC/USDT:15m"],
            "decided_by": "claude",
            "usage": {**haiku, "model": "claude-haiku-4-5+claude-sonnet-4-6", "cost_usd": 0.015},
            "raw_decision": {"attempts": [{"usage": haiku}, {"usage": sonnet}]},
        },
        {"type": "decision", "at_ms": 1, "trigger": ["agent_timer"], "decided_by": "unchanged"},
        {
            "type": "decision",
            "at_ms": 2,
            "trigger": ["anomaly:SOL/USDT:z=-3.0"],
            "decided_by": "claude",
            "usage": sonnet,
            "raw_decision": {"attempts": [{"usage": sonnet}]},
        },
        {
            "type": "review",
            "at_ms": 3,
            "decided_by": "claude",
            "usage": haiku,
            "attempts": [{"usage": haiku}],
        },
    ]
    summary = cost_summary(records, days=2.0)
    layers = {row.name: row for row in summary.by_layer}
    assert (layers["candle_close"].calls, layers["agent_timer"].calls) == (1, 0)
    assert layers["review"].calls == 1 and layers["anomaly"].cost_usd == pytest.approx(0.01)
    models = {row.name: row for row in summary.by_model}
    assert models["claude-haiku-4-5"].calls == 2 and models["claude-sonnet-4-6"].calls == 2
    assert models["claude-sonnet-4-6"].cache_share == pytest.approx(0.75)
    deciders = {row.name: row for row in summary.by_decider}
    assert deciders["unchanged"].decisions == 1 and deciders["unchanged"].calls == 0
    assert summary.per_day(summary.total.cost_usd) == pytest.approx((0.015 + 0.01 + 0.005) / 2)
    assert summary.total.calls == 3


def test_the_cost_book_splits_the_same_figures_per_utc_day() -> None:
    from agent.cost_accounting import MS_PER_DAY, CostBook, day_name

    haiku = usage("claude-haiku-4-5", 3000, 0, 400, 0.005)
    lines: list[dict[str, Any]] = [
        {"type": "decision", "at_ms": MS_PER_DAY - 1, "trigger": ["agent_timer"],
         "decided_by": "claude", "usage": haiku, "attempts": [{"usage": haiku}]},
        {"type": "review", "at_ms": MS_PER_DAY, "decided_by": "claude", "usage": haiku,
         "attempts": [{"usage": haiku}]},
        {"type": "agent_failure", "at_ms": MS_PER_DAY + 1, "kind": "overloaded"},
        {"type": "decision", "trigger": ["agent_timer"], "decided_by": "unchanged"},  # no at_ms
    ]  # fmt: skip
    book = CostBook()
    for line in lines:
        book.add(line)
    assert book.day_numbers() == [0, 1] and day_name(1) == "1970-01-02"
    assert book.day(0) == cost_summary(lines[:1], 1.0)
    assert book.day(1) == cost_summary(lines[1:3], 1.0)
    assert book.day(7).total.decisions == 0
