"""Replay with ``--decider claude`` against a fake Messages API on loopback (the real SDK through
``base_url``): every decision is Claude's, its usage is journaled and reported, and virtual time
stands still while a call is in flight (the driver's busy probe), however slow the answer."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from fakes.claude_support import answer, hold_answer
from fakes.messages_api import (
    FakeMessagesApi,
    error_response,
    json_message,
    rate_limited,
    text_message,
)
from fakes.snapshot_answerer import snapshot_of
from replay_support import claude_settings, replay_options

from report.html import write_report
from runner.replay.build import ReplayOptions, build_replay, replay_settings
from runner.replay.command import ReplayOutcome, run_replay

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

TICKER = "BTC/USDT"
SCRIPTED = 40  # more than the span asks for: the test counts what was used
SPAN_HOURS = 6
ANSWER_DELAY_SECS = 0.05  # real seconds: the replay must not move on meanwhile


async def test_a_claude_replay_decides_with_claude_and_time_waits_for_each_answer(
    tmp_path: Path,
) -> None:
    async with FakeMessagesApi() as api:
        api.script(
            *(
                replace(json_message(hold_answer(TICKER, 3600)), delay_secs=ANSWER_DELAY_SECS)
                for _ in range(SCRIPTED)
            )
        )
        config_dir = tmp_path / "config"
        config_dir.mkdir()
        settings = claude_settings(config_dir, api.base_url)
        whole_day = replay_options(
            tmp_path / "run", "2025-03-01", 1, tickers=(TICKER,), decider="claude"
        )
        options = replace(whole_day, end_ms=whole_day.start_ms + SPAN_HOURS * 3_600_000)
        outcome = await run_replay(build_replay(replay_settings(settings, options), options))
        calls = len(api.requests)

    assert outcome.finished
    lines = [
        json.loads(line)
        for line in (options.out_dir / "logs" / "decisions.jsonl").read_bytes().splitlines()
    ]
    decisions = [line for line in lines if line.get("type") == "decision"]
    # 6 h of 15m closes (the hour timer Claude set never fires before the next close)
    assert len(decisions) == 24 == calls
    assert all(d["decided_by"] == "claude" for d in decisions), {d["decided_by"] for d in decisions}
    for d in decisions:
        # the gate was updated at the instant the decision started: no clock step happened
        # during the 50 ms the answer took
        assert d["gate_update"]["at_ms"] == d["at_ms"], d["decision_id"]
        assert d["gate_update"]["next_check_secs"] == 3600.0
    last_agent = decisions[-1]["agent"]
    assert last_agent["calls"] == calls and last_agent["failed_calls"] == 0
    assert last_agent["input_tokens"] > 0 and last_agent["cost_total_usd"] > 0

    report = write_report(options.out_dir)
    assert {(d.decided_by, d.decisions) for d in report.deciders} == {("claude", 24)}
    (day,) = report.days
    assert day.agent_calls == calls
    assert day.cost_usd == pytest.approx(last_agent["cost_total_usd"], rel=1e-9)


#: real seconds: a replay of one hour with two answers takes well under a second; a deadlocked
#: one never ends (the driver's busy probe spins), so only a bound this loose tells them apart
DEADLOCK_BOUND_SECS = 60.0


async def _an_hour(tmp_path: Path, api: FakeMessagesApi) -> tuple[ReplayOutcome, ReplayOptions]:
    """The first hour of 2025-03-01 replayed with Claude at ``api``; a replay that stands still
    fails at ``DEADLOCK_BOUND_SECS`` of real time."""
    config_dir = tmp_path / "config"
    config_dir.mkdir()
    settings = claude_settings(config_dir, api.base_url)
    whole_day = replay_options(
        tmp_path / "run", "2025-03-01", 1, tickers=(TICKER,), decider="claude"
    )
    options = replace(whole_day, end_ms=whole_day.start_ms + 3_600_000)
    async with asyncio.timeout(DEADLOCK_BOUND_SECS):
        outcome = await run_replay(build_replay(replay_settings(settings, options), options))
    return outcome, options


@pytest.mark.parametrize(
    "first",
    [
        pytest.param(lambda: error_response(529, "overloaded_error", "Overloaded"), id="529"),
        pytest.param(lambda: rate_limited(2.0), id="short-retry-after"),
        pytest.param(lambda: text_message("not json at all"), id="invalid-answer"),
    ],
)
async def test_a_retry_inside_a_decision_waits_on_the_virtual_clock_and_the_replay_goes_on(
    tmp_path: Path, first: Any
) -> None:
    async with FakeMessagesApi() as api:
        api.script(first(), *(json_message(hold_answer(TICKER, 3600)) for _ in range(SCRIPTED)))
        outcome, options = await _an_hour(tmp_path, api)

    assert outcome.finished
    lines = (options.out_dir / "logs" / "decisions.jsonl").read_bytes().splitlines()
    decisions = [d for d in map(json.loads, lines) if d.get("type") == "decision"]
    assert len(decisions) == 4
    assert all(d["decided_by"] == "claude" for d in decisions)
    attempts = decisions[0]["raw_decision"]["attempts"]
    assert [a["outcome"] for a in attempts] == ["failed", "ok"]
    # the retry waited on the virtual clock: the decision's gate update is later than its start
    assert decisions[0]["gate_update"]["at_ms"] > decisions[0]["at_ms"]


async def test_a_position_review_that_claude_fails_waits_on_the_virtual_clock_too(
    tmp_path: Path,
) -> None:
    """Decisions buy, and every position review is answered 529. The review's retry backoff
    slept in a task that ``wait_for`` started for it, the review's own task waited on that task
    and not on the clock, so the driver never moved time: the replay stood still for ever at
    the first review."""
    asked: list[str] = []

    def respond(body: dict[str, Any]) -> Any:
        if snapshot_of(body) is None:  # a position review
            asked.append("review")
            return error_response(529, "overloaded_error", "Overloaded")
        asked.append("decision")
        buy = answer(decisions=[{**answer()["decisions"][0], "ticker": TICKER}])
        return json_message({**buy, "next_check_seconds": 3600})

    async with FakeMessagesApi() as api:
        api.responder = respond
        outcome, _ = await _an_hour(tmp_path, api)

    assert outcome.finished and outcome.fills >= 1
    assert asked.count("review") >= 2  # a first try and its retry, after the backoff
