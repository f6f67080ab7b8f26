"""``vigil trading`` and ``serve`` given a state dir that does not exist (a mistyped ``--state-dir``
or ``VIGIL_STATE_DIR``): ``trading halt`` made the folder, wrote a halt no daemon reads and said it
was written (exit 0); ``trading status`` said active; ``serve`` made the folder and served nothing.
Each now refuses in one line naming the folder (exit 78) and makes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.errors import EXIT_REFUSE_TO_START
from runner.commands import main

COMMANDS = [
    ["trading", "status"],
    ["trading", "halt", "--reason", "news"],
    ["trading", "resume"],
    ["serve", "--port", "0"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_a_missing_state_dir_is_refused_in_one_line(
    tmp_path: Path, command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "vigil-stat"  # a typo of vigil-state
    assert main(["--state-dir", str(missing), *command]) == EXIT_REFUSE_TO_START
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [
        f"vigil: refusing to start: no state dir at {missing}: is --state-dir (or "
        f"VIGIL_STATE_DIR) right? vigil {command[0]} acts on a daemon's state dir (make the "
        "folder to prepare a new one)"
    ]
    assert not missing.exists()


def test_an_existing_empty_state_dir_still_works(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A new instance prepared by hand: the folder made first, then halted before its start."""
    (tmp_path / "state").mkdir()
    assert main(["--state-dir", str(tmp_path / "state"), "trading", "halt", "--reason", "x"]) == 0
    assert "HALTED" in capsys.readouterr().out
