"""The default state dir is ./vigil-state, not the ``state`` source package; a package folder is
refused as a state dir before anything is written into it."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.errors import EXIT_REFUSE_TO_START, RefuseToStartError
from runner.cli import main
from runner.config import STATE_DIR, Settings
from state.state_dir import refuse_package_dir

REPO = Path(__file__).resolve().parents[2]


def test_the_default_is_vigil_state_in_the_working_directory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("VIGIL_STATE_DIR", raising=False)
    assert Settings().state_dir == STATE_DIR == Path("vigil-state")
    assert not (REPO / STATE_DIR / "__init__.py").exists()
    assert "--state-dir $(STATE_DIR) run --sim" in (REPO / "Makefile").read_text()
    assert "VIGIL_STATE_DIR=/data" in (REPO / "Dockerfile").read_text()


@pytest.mark.parametrize("command", [["run", "--sim"], ["serve"]])
def test_a_python_package_is_refused_as_state_dir(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    package = REPO / "state"
    before = sorted(p.name for p in package.iterdir())
    assert main(["--state-dir", str(package), *command]) == EXIT_REFUSE_TO_START
    assert "is a Python package folder" in capsys.readouterr().err
    assert sorted(p.name for p in package.iterdir()) == before  # nothing written into it


def test_refuse_package_dir(tmp_path: Path) -> None:
    refuse_package_dir(tmp_path)  # a plain folder is fine
    refuse_package_dir(tmp_path / "missing")
    (tmp_path / "__init__.py").write_text("")
    with pytest.raises(RefuseToStartError, match="--state-dir or VIGIL_STATE_DIR"):
        refuse_package_dir(tmp_path)
