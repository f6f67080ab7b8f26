"""``vigil memory`` on a state dir that is a file (a mistyped ``--state-dir``): the store's folder
cannot be made, and the command says so naming the file (exit 1, as for a file that is no
database). It was a ``FileExistsError`` traceback from every graph command."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.cli import main


@pytest.mark.parametrize("command", [["list"], ["stats"], ["add", "Funding spikes fade fast."]])
def test_a_state_dir_that_is_a_file_is_a_store_unavailable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    state = tmp_path / "state"
    state.write_text("not a folder\n")
    assert main(["--state-dir", str(state), "memory", *command]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"vigil memory: memory store unavailable: {state / 'memory.db'}: ")
    assert "cannot make its folder" in err
    assert state.read_text() == "not a folder\n"
