"""``vigil prompt --role ROLE``: what a debate role would be sent for the latest snapshot."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest
from fakes.claude_support import snapshot

from agent.debate_roles import SYSTEM_PROMPTS, output_config
from runner.config import Settings
from runner.prompt_cmd import render_prompt

SECRET = "sk-ant-test-prompt-secret-0123456789"


@pytest.mark.parametrize(
    ("role", "model"), [("bull", "claude-haiku-4-5"), ("trader", "claude-sonnet-4-6")]
)
def test_a_role_prompt_is_its_system_prompt_schema_and_fenced_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, role: str, model: str
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    snap = snapshot(memory="a note")
    line = {
        "type": "decision",
        "decision_id": "d1",
        "at_ms": snap.at_ms,
        "trigger": ["t"],
        "snapshot": snap.model_dump(mode="json"),
    }
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "decisions.jsonl").write_bytes(orjson.dumps(line) + b"\n")
    notes: list[str] = []

    text = render_prompt(Settings(state_dir=tmp_path), note=notes.append, role=role)  # type: ignore[arg-type]

    request = json.loads(text)
    assert request["system"][0]["text"] == SYSTEM_PROMPTS[role]  # type: ignore[index]
    assert request["system"][0]["text"].startswith(f"ROLE: {role}\n")
    assert request["output_config"] == output_config(role)  # type: ignore[arg-type]
    assert request["model"] == model
    assert "temperature" not in request
    content = request["messages"][0]["content"]
    for tag in ("snapshot", "memories", "working_memory", "arguments"):
        assert f"<{tag}>" in content and f"</{tag}>" in content
    assert "valid JSON only, short and to the point" in request["system"][0]["text"]
    assert SECRET not in text and any(role in n for n in notes)
