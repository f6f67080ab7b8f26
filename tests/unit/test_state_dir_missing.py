"""``vigil trading``, ``serve`` and ``memory list`` (and the memory commands that read) given a
state dir that does not exist (a mistyped ``--state-dir`` or ``VIGIL_STATE_DIR``): ``trading
halt`` made the folder, wrote a halt no daemon reads and said it was written (exit 0); ``trading
status`` said active; ``serve`` made the folder and served nothing; ``memory list`` made it and an
empty ``memory.db`` and listed nothing (exit 0). Each now refuses in one line naming the folder
(exit 78) and makes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.errors import EXIT_REFUSE_TO_START, RefuseToStartError
from runner.commands import main
from runner.config import Settings
from runner.state_dir_check import require_state_dir

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
    assert _refusal(missing, command, capsys) == (
        f"vigil {command[0]} acts on a daemon's state dir (make the folder to prepare a new one)"
    )


def _refusal(missing: Path, argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """What ``vigil --state-dir MISSING ARGV`` says after naming the folder, checking that it
    refused (exit 78) in one line on stderr and made nothing."""
    assert main(["--state-dir", str(missing), *argv]) == EXIT_REFUSE_TO_START
    out, err = capsys.readouterr()
    assert out == "" and not missing.exists()
    (line,) = err.splitlines()
    named = (
        f"vigil: refusing to start: no state dir at {missing}: is --state-dir (or "
        "VIGIL_STATE_DIR) right? "
    )
    assert line.startswith(named), line
    return line.removeprefix(named)


def test_an_existing_empty_state_dir_still_works(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A new instance prepared by hand: the folder made first, then halted before its start."""
    (tmp_path / "state").mkdir()
    assert main(["--state-dir", str(tmp_path / "state"), "trading", "halt", "--reason", "x"]) == 0
    assert "HALTED" in capsys.readouterr().out


MEMORY_READS = [
    ["list"],
    ["search", "funding"],
    ["show", "i-1"],
    ["forget", "i-1"],
    ["export"],
    ["stats"],
    ["notes", "history"],
    ["notes", "rollback", "1"],
]


@pytest.mark.parametrize("command", MEMORY_READS, ids=" ".join)
def test_a_memory_read_of_a_missing_state_dir_makes_nothing(
    tmp_path: Path, command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert _refusal(tmp_path / "vigil-stat", ["memory", *command], capsys) == (
        f"vigil memory {command[0]} reads a state dir's memory and makes none (vigil memory add "
        "or import fill a new one)"
    )


def test_memory_add_still_fills_a_new_instance_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    new = tmp_path / "new-instance"
    assert main(["--state-dir", str(new), "memory", "add", "Funding spikes fade fast."]) == 0
    assert (new / "memory.db").is_file()
    assert main(["--state-dir", str(new), "memory", "list"]) == 0
    assert "Funding spikes fade fast." in capsys.readouterr().out


def test_a_graph_read_with_neo4j_needs_no_state_dir(tmp_path: Path) -> None:
    """The graph is in Neo4j then; the notes are still the state dir's."""
    settings = Settings(state_dir=tmp_path / "none", memory={"neo4j_uri": "bolt://127.0.0.1:1"})
    require_state_dir("memory", settings, "list")
    with pytest.raises(RefuseToStartError, match="vigil memory notes reads"):
        require_state_dir("memory", settings, "notes")
