"""``vigil replay --decider debate``: refused without a key or a daily budget, with the calls and
list-price dollars the span would cost; the settings it runs with say decider = debate."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import SecretStr

from agent.config import AgentConfig
from core.errors import RefuseToStartError
from runner.config import Settings
from runner.replay.build import ReplayOptions, replay_settings
from runner.replay.estimate import debate_cost_estimate

DAY_MS = 86_400_000
START_MS = 1_740_787_200_000  # 2025-03-01


def _options(tmp_path: Path) -> ReplayOptions:
    return ReplayOptions(
        start_ms=START_MS,
        end_ms=START_MS + 2 * DAY_MS,
        out_dir=tmp_path / "run",
        tickers=("BTC/USDT",),
        decider="debate",
    )


def test_without_a_budget_the_debate_replay_refuses_and_says_what_it_would_cost(
    tmp_path: Path,
) -> None:
    settings = Settings(state_dir=tmp_path, anthropic_api_key=SecretStr("sk-test-0123456789abc"))
    with pytest.raises(RefuseToStartError) as refused:
        replay_settings(settings, _options(tmp_path))
    text = str(refused.value)
    assert "--decider debate needs a daily budget" in text
    assert "6 calls per decision" in text and "1,152 calls" in text and "at list price" in text


def test_the_debate_replay_runs_the_debate_decider_with_the_key(tmp_path: Path) -> None:
    settings = Settings(
        state_dir=tmp_path,
        anthropic_api_key=SecretStr("sk-test-0123456789abc"),
        agent=AgentConfig(daily_budget_usd=5.0),
    )
    ran = replay_settings(settings, _options(tmp_path))
    assert ran.agent.decider == "debate" and ran.anthropic_api_key is not None


def test_the_estimate_prices_each_role_at_its_model() -> None:
    agent = AgentConfig()
    one = debate_cost_estimate(agent, 1)
    haiku, sonnet = agent.for_model("claude-haiku-4-5"), agent.for_model(agent.model)
    expected = (
        4 * haiku.cost_usd(4000, 250) + sonnet.cost_usd(4000, 750) + sonnet.cost_usd(4000, 400)
    )
    assert one.calls == 6 and one.usd == pytest.approx(expected)
