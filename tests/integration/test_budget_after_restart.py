"""The daily budget outlives a restart: what the decisions journal says the models cost today and
earlier this month is where a started daemon's budget begins. It began at 0 at every start, so a
daemon restarted (or crash-looping under a restart policy) spent its day's budget again each time.
Through the composition root (``build_agents``) over a state dir's journal, rotated segment too."""

from __future__ import annotations

import asyncio
import gzip
from pathlib import Path
from typing import Any

import orjson
import pytest
from fakes.fixed_clock import FixedClock

from agent.claude import ClaudeDecider
from core.bus import EventBus
from runner.agent_wiring import build_agents
from runner.config import Settings

DAY_MS = 86_400_000
NOW_MS = 1_758_283_200_000  # 2025-09-19T12:00:00Z
TODAY_MS = NOW_MS - NOW_MS % DAY_MS


def line(at_ms: int, cost_usd: float) -> dict[str, Any]:
    used = {"model": "claude-sonnet-4-6", "input_tokens": 1000, "output_tokens": 200,
            "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "cost_usd": cost_usd}  # fmt: skip
    return {"type": "decision", "decision_id": f"d{at_ms}", "at_ms": at_ms,
            "trigger": ["agent_timer"], "decided_by": "claude", "usage": used,
            "raw_decision": {"attempts": [{"usage": used}]}}  # fmt: skip


def write_journal(state_dir: Path) -> None:
    logs = state_dir / "logs"
    logs.mkdir(parents=True)
    earlier = [line(TODAY_MS - 40 * DAY_MS, 100.0), line(TODAY_MS - 3 * DAY_MS, 6.0)]
    with gzip.open(logs / "decisions.20250917T000000Z.jsonl.gz", "wb") as segment:
        segment.write(b"".join(orjson.dumps(r) + b"\n" for r in earlier))
    today = [line(TODAY_MS + 60_000, 3.0), line(TODAY_MS + 120_000, 1.5)]
    (logs / "decisions.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in today))


def decider(settings: Settings) -> ClaudeDecider:
    agents = build_agents(settings, FixedClock(NOW_MS), EventBus(), None, lambda _r: None)  # type: ignore[arg-type]
    if agents.client is not None:  # dropped open, the SDK closes it on whatever loop runs later
        asyncio.run(agents.client.aclose())
    assert isinstance(agents.decider, ClaudeDecider)
    return agents.decider


@pytest.fixture
def settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    monkeypatch.delenv("ANTHROPIC_API_KEY_FILE", raising=False)
    write_journal(tmp_path / "state")
    return Settings(state_dir=tmp_path / "state", anthropic_api_key="sk-ant-api03-test-111")


def test_a_restart_keeps_what_today_already_spent(settings: Settings) -> None:
    settings = settings.model_copy(
        update={"agent": settings.agent.model_copy(update={"daily_budget_usd": 5.0})}
    )
    budget = decider(settings).ledger.budget
    assert budget.spent_today_usd == pytest.approx(4.5)
    assert not budget.exhausted()
    budget.spend(0.5)
    assert budget.exhausted()


def test_an_auto_budget_spreads_what_the_month_left_over_its_days(settings: Settings) -> None:
    agent = settings.agent.model_copy(
        update={"daily_budget_usd": "auto", "monthly_budget_usd": 30.0}
    )
    budget = decider(settings.model_copy(update={"agent": agent})).ledger.budget
    # September: 12 days left today included; 6 spent on the 16th (the 40-days-ago 100 is August's)
    assert budget.limit_usd == pytest.approx((30.0 - 6.0) / 12)
    assert budget.spent_today_usd == pytest.approx(4.5)
    assert budget.exhausted()


def test_without_a_key_nothing_is_read_and_nothing_counted(tmp_path: Path) -> None:
    (tmp_path / "state" / "logs").mkdir(parents=True)
    (tmp_path / "state" / "logs" / "decisions.jsonl").mkdir()  # unreadable: and not read
    settings = Settings(state_dir=tmp_path / "state", anthropic_api_key=None)
    assert decider(settings).ledger.budget.spent_today_usd == 0.0


def test_a_journal_that_cannot_be_read_is_said_and_the_budget_counts_from_0(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY_FILE", raising=False)
    (tmp_path / "state" / "logs" / "decisions.jsonl").mkdir(parents=True)
    settings = Settings(state_dir=tmp_path / "state", anthropic_api_key="sk-ant-api03-test-111")
    assert decider(settings).ledger.budget.spent_today_usd == 0.0
    assert "the journal's spend cannot be read" in caplog.text


def test_a_restart_keeps_what_today_s_reflections_spent(settings: Settings) -> None:
    """A trade's reflection by Claude is billed to the same budget and journaled as its own line
    (``{"type": "reflection", ...}``, as ``ClaudeReflector`` writes it); the journal's cost
    figures read only decision and review lines, so a restart forgot what reflections spent."""
    used = {"model": "claude-sonnet-4-6", "input_tokens": 1000, "output_tokens": 200,
            "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "cost_usd": 2.0}  # fmt: skip
    reflection = {"type": "reflection", "at_ms": TODAY_MS + 180_000, "trade_id": "t1",
                  "outcome": "ok", "attempts": [{"attempt": 1, "outcome": "ok", "usage": used}],
                  "usage": used}  # fmt: skip
    journal = settings.state_dir / "logs" / "decisions.jsonl"
    with journal.open("ab") as out:
        out.write(orjson.dumps(reflection) + b"\n")
    budget = decider(settings).ledger.budget
    assert budget.spent_today_usd == pytest.approx(4.5 + 2.0)
