"""``vigil replay --decider debate`` with memory ON and OFF against the role-aware fake Messages API
(the real SDK through ``base_url``): every decision is a debate of six role calls, the journal
carries the roles, their costs and the memories each retrieved, and the two runs' compare differs
because the fake trader acts only on retrieved lessons (memory ON)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from fakes.debate_support import DebateAnswers
from fakes.messages_api import FakeMessagesApi
from pydantic import SecretStr
from replay_support import default_settings, replay_options

from agent.config import AgentConfig
from report.compare import compare_runs
from report.html import write_report
from runner.config import Settings
from runner.replay.build import build_replay, replay_settings
from runner.replay.command import ReplayOutcome, run_replay

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

TICKER = "BTC/USDT"
DAYS = 1


def _decisions(run: Path) -> list[dict[str, Any]]:
    lines = (run / "logs" / "decisions.jsonl").read_bytes().splitlines()
    return [d for d in map(json.loads, lines) if d.get("type") == "decision"]


async def _replay(settings: Settings, out: Path, *, memory: bool) -> ReplayOutcome:
    options = replace(
        replay_options(out, "2025-03-01", DAYS, tickers=(TICKER,), decider="debate"),
        memory=memory,
    )
    return await run_replay(build_replay(replay_settings(settings, options), options))


async def test_a_day_of_debate_replay_with_memory_on_and_off(tmp_path: Path) -> None:
    runs: dict[str, Path] = {"on": tmp_path / "memory-on", "off": tmp_path / "memory-off"}
    calls: dict[str, dict[str, int]] = {}
    for name, run in runs.items():
        async with FakeMessagesApi() as api:
            answers = DebateAnswers()
            api.responder = answers.respond
            config_dir = tmp_path / f"config-{name}"
            config_dir.mkdir()
            settings = default_settings(config_dir).model_copy(
                update={
                    "anthropic_api_key": SecretStr("sk-test-replay-0123456789"),
                    "agent": AgentConfig(base_url=api.base_url, daily_budget_usd=50.0),
                }
            )
            outcome = await _replay(settings, run, memory=name == "on")
            assert outcome.finished
            calls[name] = dict(answers.calls)

    on, off = _decisions(runs["on"]), _decisions(runs["off"])
    for lines in (on, off):
        assert lines and all(d["raw_decision"]["debate"] is not None for d in lines)
        assert {d["decided_by"] for d in lines} == {"debate"}
        assert all(len(d["raw_decision"]["debate"]["roles"]) >= 6 for d in lines)
    # memory ON: the journal shows the memories each role retrieved, with their score parts
    used = [d["raw_decision"]["debate"]["memories_used"] for d in on]
    assert used[0] == 0 and sum(used) > 0
    manager = [r for r in on[-1]["raw_decision"]["debate"]["roles"] if r["role"] == "manager"]
    assert manager[0]["memories"] and "score" in manager[0]["memories"][0]
    assert all(d["raw_decision"]["debate"]["memories_used"] == 0 for d in off)
    # the trader acted on memories: trades with memory ON, none without
    assert any(d["accepted"] for d in on) and not any(d["accepted"] for d in off)
    # every role's call was counted per role, and bull and bear argued twice per decision
    assert calls["on"]["bull"] == calls["on"]["bear"] == 2 * len(on)
    assert calls["on"]["trader"] == calls["on"]["manager"] == len(on)
    assert calls["on"].get("reflection", 0) >= 1  # exits were reflected on

    for run in runs.values():
        write_report(run)
    table = compare_runs(runs["on"], runs["off"])
    rows = {line.split("  ")[0].strip(): line for line in table.splitlines() if line.strip()}
    for figure in (
        "total return %",
        "CAGR %",
        "Sharpe",
        "max drawdown %",
        "turnover x",
        "agent calls per day",
        "tokens per day",
        "agent cost USD per day",
    ):
        assert figure in rows, (figure, table)
    assert rows["turnover x"].split()[2] != rows["turnover x"].split()[3], table
