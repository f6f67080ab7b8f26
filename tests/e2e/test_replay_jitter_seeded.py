"""A replay in which a call fails once is repeatable: the retry's jitter comes from ``--seed``.

A retry's jittered wait moves the virtual clock, and every later decision with it. It was drawn
from an unseeded source, so a replay with one 529 from the Messages API gave another
decisions.jsonl at every run. Now the replay's one jitter source is ``random.Random(seed)``
(``runner.replay.ports``): the same seed gives the same bytes, and the wait is the one that seed
draws.
"""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from fakes.claude_support import hold_answer
from fakes.messages_api import FakeMessagesApi, ScriptedResponse, json_message, overloaded
from replay_support import claude_settings, replay_options

from agent.claude_client import DEFAULT_BACKOFF
from runner.replay.build import build_replay, replay_settings
from runner.replay.command import run_replay

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

TICKER = "BTC/USDT"
SCRIPTED = 10  # more than the hour asks for (4 closes)


def _overloaded() -> ScriptedResponse:
    """A 529 with the same body in every run (the fake numbers its error bodies per process, and
    the journal keeps the error)."""
    scripted = overloaded()
    assert isinstance(scripted.body, dict)
    return replace(scripted, body={**scripted.body, "request_id": "req_overloaded"})


async def _replay_with_one_overload(root: Path, seed: int) -> bytes:
    """An hour of Claude decisions whose first call is answered 529 once; its decisions.jsonl."""
    async with FakeMessagesApi() as api:
        api.script(
            _overloaded(),
            *(json_message(hold_answer(TICKER)) for _ in range(SCRIPTED)),
        )
        config_dir = root / "config"
        config_dir.mkdir(parents=True)
        settings = claude_settings(config_dir, api.base_url)
        day = replay_options(
            root / "run", "2025-03-01", 1, tickers=(TICKER,), decider="claude", seed=seed
        )
        options = replace(day, end_ms=day.start_ms + 3_600_000)
        outcome = await run_replay(build_replay(replay_settings(settings, options), options))
    assert outcome.finished
    return (options.out_dir / "logs" / "decisions.jsonl").read_bytes()


def _first_decision(journal: bytes) -> dict[str, Any]:
    lines = [json.loads(line) for line in journal.splitlines()]
    first: dict[str, Any] = next(line for line in lines if line.get("type") == "decision")
    attempts = first["raw_decision"]["attempts"]
    assert [a["outcome"] for a in attempts] == ["failed", "ok"]  # the 529 was retried
    return first


def _retry_wait_ms(journal: bytes) -> int:
    """How far the retry moved the clock: from the decision's start to its gate update."""
    first = _first_decision(journal)
    return int(first["gate_update"]["at_ms"] - first["at_ms"])


async def test_the_same_seed_gives_the_same_journal_when_a_call_is_retried(
    tmp_path: Path,
) -> None:
    first = await _replay_with_one_overload(tmp_path / "first", seed=42)
    second = await _replay_with_one_overload(tmp_path / "second", seed=42)

    assert _retry_wait_ms(first) > 0
    assert first == second


async def test_the_retry_waits_what_the_seed_draws(tmp_path: Path) -> None:
    """Two seeds: each retry waits the delay its own ``random.Random(seed)`` draws first (the
    only jitter drawn in the hour), so the seed, and nothing else, chooses the wait."""
    waits = {}
    for seed in (1, 2):
        journal = await _replay_with_one_overload(tmp_path / f"seed-{seed}", seed=seed)
        waits[seed] = _retry_wait_ms(journal)
        drawn_secs = DEFAULT_BACKOFF.delay_secs(0, random.Random(seed).random())
        assert waits[seed] == pytest.approx(drawn_secs * 1000, abs=1), seed
    assert waits[1] != waits[2]
