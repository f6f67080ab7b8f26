"""A file given as the data dir (``vigil replay --data-dir``, a sweep grid's ``data_dir``) is
refused saying it is not a folder; it was said not to exist, sending the person to look for a
missing path that is there. ``vigil data check`` said so already."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.errors import EXIT_REFUSE_TO_START
from runner.cli import main


@pytest.fixture
def a_file(tmp_path: Path) -> Path:
    path = tmp_path / "data.csv"
    path.write_text("someone's file\n")
    return path


def test_replay_says_a_data_dir_that_is_a_file_is_not_a_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], a_file: Path
) -> None:
    out = tmp_path / "run"
    args = ["--from", "2025-03-01", "--to", "2025-03-01", "--tickers", "BTC/USDT"]
    code = main(["replay", *args, "--out", str(out), "--data-dir", str(a_file)])
    assert code == EXIT_REFUSE_TO_START
    assert f"data dir {a_file} is not a folder" in capsys.readouterr().err
    assert not out.exists()


def test_a_sweep_says_a_data_dir_that_is_a_file_is_not_a_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], a_file: Path
) -> None:
    grid = tmp_path / "grid.toml"
    grid.write_text(
        'periods = [["2025-03-01", "2025-03-01"]]\ntickers = [["BTC/USDT"]]\n'
        f"data_dir = {str(a_file)!r}\n"
    )
    code = main(["sweep", str(grid), "--out", str(tmp_path / "sweep"), "--workers", "1"])
    assert code == EXIT_REFUSE_TO_START
    assert f"data dir {a_file} is not a folder" in capsys.readouterr().err


def test_a_data_dir_that_is_missing_is_still_said_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nowhere"
    args = ["--from", "2025-03-01", "--to", "2025-03-01", "--tickers", "BTC/USDT"]
    code = main(["replay", *args, "--out", str(tmp_path / "run"), "--data-dir", str(missing)])
    assert code == EXIT_REFUSE_TO_START
    assert f"data dir {missing} does not exist" in capsys.readouterr().err
