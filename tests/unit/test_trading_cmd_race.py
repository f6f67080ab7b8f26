"""`vigil trading halt|resume` and a person saving runner_state.json while it writes: the person's
save is merged, not overwritten (``state.merge_write``, as the daemon's MEMORY.md write-back).

The save is injected at a fixed step of the write (no threads, no sleeps): after the command read
the file and wrote its temporary file (``state.atomic._write_durable_tmp``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes.save_race import save_after_tmp_written

from runner.cli import main
from state.models import RunnerState, parse_state_bytes, render_state
from state.trading import HALTED, TradingState


@pytest.mark.parametrize("command", ["halt", "resume"])
def test_a_person_s_save_during_the_write_is_merged_not_overwritten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    path = tmp_path / "runner_state.json"
    halted = TradingState(mode=HALTED, reason="audit", since_ms=1, by="cli")
    before = RunnerState(notes="first", trading=halted if command == "resume" else TradingState())
    path.write_bytes(render_state(before))
    saved = render_state(before.model_copy(update={"notes": "first, then a second thought"}))
    landed = save_after_tmp_written(monkeypatch, path, saved)
    argv = ["--state-dir", str(tmp_path), "trading", command]
    assert main([*argv, "--reason", "audit"] if command == "halt" else argv) == 0
    assert landed  # the save did land between the read and the replace
    after, _ = parse_state_bytes(path.read_bytes())
    assert after.notes == "first, then a second thought"
    assert after.trading.halted is (command == "halt")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runner_state.json"]
