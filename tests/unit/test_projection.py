"""The projection printed before spending: calls and dollars per day from the settings and the
recent gate rate (the journal's, else the measured default)."""

from __future__ import annotations

import math
from pathlib import Path

import orjson
import pytest

from agent.claude_prompt import decision_system_prompt
from agent.claude_schema import DEFAULT_WAKE_RULES, WakeRules, output_config
from agent.config import AgentConfig
from agent.materiality import DeltaConfig
from agent.projection import MEASURED_RATE, GateRate, call_usd, prefix_tokens, project
from agent.tiers import TierConfig
from gate.conditions import MAX_WAKE_CONDITIONS
from runner.cost_projection import journal_rate, projection, projection_text

RATE = GateRate(
    passes_per_day={"candle_close": 96.0, "anomaly": 30.0}, reviews_per_day=10.0, source="test"
)
EVERY_PASS = AgentConfig(tiers=TierConfig(routine_model=None), delta=DeltaConfig(enabled=False))


def test_with_every_pass_a_call_the_calls_are_the_passes_on_the_strong_model() -> None:
    result = project(EVERY_PASS, RATE, tickers=3)
    assert result.calls_per_day == pytest.approx(136.0)
    assert {row.model for row in result.layers} == {"claude-sonnet-4-6"}
    per_call = call_usd(EVERY_PASS, "claude-sonnet-4-6", 3)
    assert result.usd_per_day > 126 * per_call


def test_delta_gating_cuts_only_routine_passes_and_tiers_move_them_to_the_cheap_model() -> None:
    rate = RATE.model_copy(update={"unchanged_share": 0.5})
    result = project(AgentConfig(), rate, tickers=3)
    rows = {row.layer: row for row in result.layers}
    assert rows["candle_close"].calls_per_day == pytest.approx(48.0)
    assert rows["candle_close"].model == "claude-haiku-4-5"
    assert (rows["anomaly"].calls_per_day, rows["anomaly"].model) == (30.0, "claude-sonnet-4-6")
    assert rows["review"].model == "claude-haiku-4-5"
    assert result.usd_per_day < project(EVERY_PASS, rate, tickers=3).usd_per_day / 2


def test_an_hour_long_cache_entry_makes_the_prefix_cheap_where_the_model_can_cache_it() -> None:
    assert prefix_tokens() >= 1024  # Sonnet caches it; Haiku 4.5 needs 4,096
    one_hour, five_min = AgentConfig(), AgentConfig(prompt_cache_ttl="5m")
    assert call_usd(one_hour, "claude-sonnet-4-6", 3) < call_usd(five_min, "claude-sonnet-4-6", 3)
    if prefix_tokens() < 4096:
        assert call_usd(one_hour, "claude-haiku-4-5", 3) == call_usd(
            five_min, "claude-haiku-4-5", 3
        )


def test_the_recent_gate_rate_comes_from_the_journal(tmp_path: Path) -> None:
    journal = tmp_path / "decisions.jsonl"
    lines = []
    for i in range(96 * 2):  # two days of 15-minute closes, every other one unchanged
        lines.append(
            {
                "type": "decision",
                "at_ms": i * 900_000,
                "trigger": ["candle_close:BTC/USDT:15m"],
                "decided_by": "unchanged" if i % 2 else "claude",
            }
        )
    lines += [{"type": "decision", "at_ms": 1000, "trigger": ["anomaly:SOL/USDT:z=2.5"]}]
    lines += [{"type": "review", "at_ms": 2000 + i} for i in range(20)]
    journal.write_bytes(b"\n".join(orjson.dumps(line) for line in lines) + b"\n")
    rate = journal_rate(journal)
    assert rate is not None and "journal" in rate.source
    days = (191 * 900_000) / 86_400_000
    assert rate.passes_per_day["candle_close"] == pytest.approx(192 / days)
    assert rate.reviews_per_day == pytest.approx(20 / days)
    assert rate.unchanged_share == pytest.approx(0.5)


def test_without_a_journal_the_measured_rate_is_used_and_said(tmp_path: Path) -> None:
    result = projection(AgentConfig(), tmp_path / "none.jsonl", tickers=3)
    assert result.source == MEASURED_RATE.source
    text = result.text("auto: 30 USD a month over the days left")
    assert "calls a day" in text and "$" in text and "auto" in text and "estimate" in text


SIX = ("BTC/USDT", "ETH/USDT", "SOL/USDT", "BNB/USDT", "XRP/USDT", "DOGE/USDT")


def test_the_prefix_is_counted_from_the_configured_tickers_system_prompt(tmp_path: Path) -> None:
    """The system prompt lists each ticker's wake metrics: a six-ticker daemon's prefix was
    estimated from the default three tickers' prompt."""
    six = WakeRules.of(SIX, MAX_WAKE_CONDITIONS)
    sent = len(orjson.dumps(output_config())) + len(decision_system_prompt(six))
    assert prefix_tokens(six) == math.ceil(sent / 3.5) > prefix_tokens()
    config = AgentConfig(prompt_cache_ttl="5m")  # uncached: the prefix at the input price
    text = projection_text(config, tmp_path / "none.jsonl", six, len(SIX))
    default = projection_text(config, tmp_path / "none.jsonl", DEFAULT_WAKE_RULES, len(SIX))
    assert _usd(text) > _usd(default)
    assert _usd(text) == pytest.approx(project(config, MEASURED_RATE, 6, six).usd_per_day, abs=0.01)


def _usd(text: str) -> float:
    return float(text.split("about $", 1)[1].split(" ", 1)[0])


@pytest.mark.parametrize(
    "garbled",
    [
        {"type": "decision", "at_ms": "soon"},
        {"type": "decision", "at_ms": None},
        {"type": "decision", "at_ms": [1]},
        {"type": "decision", "at_ms": 4_000_000_000_000_000},  # year 128,000
        {"type": "decision", "at_ms": 1_740_787_300_000, "trigger": 5},
    ],
)
def test_a_garbled_journal_line_is_skipped_not_a_traceback_or_the_rate(
    tmp_path: Path, garbled: dict[str, object]
) -> None:
    """A line a person's edit garbled made ``vigil run``'s start (and ``vigil replay --decider
    claude``) exit with a traceback from int() or the trigger's loop, or, with a time thousands of
    years ahead, measured the rate over that line's week only (no passes a day)."""
    base = 1_740_787_200_000
    lines = [
        {"type": "decision", "at_ms": base + i * 900_000, "trigger": ["candle_close:BTC/USDT:15m"]}
        for i in range(96)
    ]
    clean = tmp_path / "clean.jsonl"
    clean.write_bytes(b"\n".join(orjson.dumps(line) for line in lines) + b"\n")
    journal = tmp_path / "decisions.jsonl"
    journal.write_bytes(clean.read_bytes() + orjson.dumps(garbled) + b"\n")
    assert journal_rate(journal) == journal_rate(clean) is not None
