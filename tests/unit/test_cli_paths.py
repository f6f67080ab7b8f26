"""Paths a person types that no command could use.

- A name past the file system's 255 bytes, typed or configured: pathlib's ``exists()`` and
  ``is_dir()`` raise ``ENAMETOOLONG`` rather than answer, and a dozen commands ended in its
  traceback. It is a usage error (exit 2) naming the path.
- Bytes that are not UTF-8 (argv carries them as surrogate escapes): ``replay --out 'run\xff'``
  ran the whole replay, then failed writing its report. A usage error naming the byte."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.errors import EXIT_USAGE
from runner.cli import main


@pytest.mark.parametrize(
    "command",
    [
        ["--state-dir", "{long}", "health"],
        ["--state-dir", "{long}", "status"],
        ["--state-dir", "{long}", "config", "show"],
        ["--state-dir", "{long}", "memory", "list"],
        ["data", "check", "{long}"],
        ["report", "{long}"],
        ["replay", "--from", "2025-03-01", "--to", "2025-03-01", "--out", "{long}"],
    ],
)
def test_a_name_too_long_for_the_file_system_is_a_usage_error(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    command: list[str],
) -> None:
    monkeypatch.delenv("VIGIL_STATE_DIR", raising=False)
    long = str(tmp_path / ("a" * 300))
    assert main([part.format(long=long) for part in command]) == EXIT_USAGE
    said = capsys.readouterr().err
    assert "a name in this path is too long for the file system" in said
    assert "Traceback" not in said and long in said


@pytest.mark.parametrize(
    "command",
    [
        ["replay", "--from", "2025-03-01", "--to", "2025-03-01", "--out", "{odd}"],
        ["replay", "--from", "2025-03-01", "--to", "2025-03-01", "--data-dir", "{odd}"],
        ["data", "import", "x.csv", "--out", "{odd}"],
    ],
)
def test_a_path_that_is_not_utf8_is_a_usage_error_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    odd = str(tmp_path / "run") + "\udcff"  # the byte 0xff, as argv hands it over
    with pytest.raises(SystemExit) as exited:
        main([part.format(odd=odd) for part in command])
    assert exited.value.code == EXIT_USAGE
    assert "not UTF-8 text: byte 0xff" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
