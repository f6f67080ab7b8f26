"""`vigil trading status|halt|resume` on something other than a state file at
``runner_state.json``: a clear error (exit 78), never a stall, and the thing is left in place."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from fakes.fifo import outcome_beside_fifo

from runner.cli import main
from runner.trading_cmd import EXIT_BAD_STATE


@pytest.mark.parametrize("command", ["status", "halt", "resume"])
def test_a_fifo_as_the_state_file_is_refused_without_blocking(
    tmp_path: Path, capsys: Any, command: str
) -> None:
    """``read_bytes`` blocked on the FIFO until someone wrote to it: the command hung."""
    path = tmp_path / "runner_state.json"
    os.mkfifo(path)
    argv = ["--state-dir", str(tmp_path), "trading", command]
    if command == "halt":
        argv += ["--reason", "audit"]
    assert outcome_beside_fifo(lambda: main(argv), path) == EXIT_BAD_STATE
    err = capsys.readouterr().err
    assert "cannot use" in err and "not a regular file" in err
    assert path.is_fifo()
