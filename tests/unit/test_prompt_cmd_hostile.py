"""`vigil prompt` over a state dir holding what a person, a model or a mistake left there: it
prints what would be sent, never blocks, and never drives the terminal it prints to."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson
import pytest
from fakes.claude_support import snapshot
from fakes.fifo import outcome_beside_fifo

from runner.cli import main


def _state_dir(tmp_path: Path, notes: str) -> Path:
    logs = tmp_path / "logs"
    logs.mkdir(parents=True)
    snap = snapshot()
    line = {
        "type": "decision",
        "decision_id": "d1",
        "at_ms": snap.at_ms,
        "trigger": ["t"],
        "snapshot": snap.model_dump(mode="json"),
    }
    (logs / "decisions.jsonl").write_bytes(orjson.dumps(line) + b"\n")
    (tmp_path / "MEMORY.md").write_text(f"# MEMORY\n{notes}\n", encoding="utf-8")
    return tmp_path


def _prompt(capsys: Any, state: Path, *extra: str) -> str:
    assert main(["--state-dir", str(state), "prompt", *extra]) == 0
    out: str = capsys.readouterr().out
    return out


@pytest.mark.parametrize("what", ["fifo", "folder"])
def test_runner_state_that_is_not_a_file_leaves_out_the_persons_notes_without_blocking(
    tmp_path: Path, capsys: Any, what: str
) -> None:
    """``read_bytes`` of a FIFO at runner_state.json blocked until someone wrote to it."""
    state = _state_dir(tmp_path, "weekends are thin")
    path = state / "runner_state.json"
    if what == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()
    code = outcome_beside_fifo(lambda: main(["--state-dir", str(state), "prompt", "--parts"]), path)
    assert code == 0
    out = capsys.readouterr().out
    assert "weekends are thin" in out
