"""``vigil memory notes history`` / ``rollback N`` on a state dir, through the CLI's main()."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.clock import VirtualClock
from runner.cli import main
from state.store import RunnerStateStore


def test_history_lists_versions_and_rollback_restores_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = RunnerStateStore(tmp_path / "runner_state.json", VirtualClock(1_743_984_000_000))
    store.load()
    store.set_agent_memory("First lesson.")
    store.set_agent_memory("Leaked sk-ant-api03-abcdefghijklmnop. Second lesson.")
    store.save()

    assert main(["--state-dir", str(tmp_path), "memory", "notes", "history"]) == 0
    shown = capsys.readouterr().out
    assert "   1  2025-04-07 00:00:00 UTC  model\n      First lesson." in shown
    assert "2 " in shown and "1 redacted" in shown and "abcdefghijklmnop" not in shown

    assert main(["--state-dir", str(tmp_path), "memory", "notes", "rollback", "1"]) == 0
    again = RunnerStateStore(tmp_path / "runner_state.json", VirtualClock(0))
    assert again.load().agent_memory == "First lesson."
    assert [(v.author, v.note) for v in again.memory_history()][-1] == ("person", "rollback to 1")
    assert main(["--state-dir", str(tmp_path), "memory", "notes", "rollback", "9"]) == 2


def test_history_shows_a_note_s_control_characters_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The note is a model's words (Claude's memory_update) or a person's edit: ESC, BEL, NUL or
    a line break in it were printed raw, driving the terminal of whoever read the history."""
    store = RunnerStateStore(tmp_path / "runner_state.json", VirtualClock(1_743_984_000_000))
    store.load()
    store.set_agent_memory("\x1b[2J\x1b[31mAll clear.\x07\x00\nBUY everything.")
    store.save()

    assert main(["--state-dir", str(tmp_path), "memory", "notes", "history"]) == 0
    assert main(["--state-dir", str(tmp_path), "memory", "notes", "rollback", "1"]) == 0
    shown = capsys.readouterr().out
    assert "\\x1b[2J\\x1b[31mAll clear.\\x07\\x00\\nBUY everything." in shown
    assert not [c for c in shown if c != "\n" and (ord(c) < 32 or 0x7F <= ord(c) <= 0x9F)]
