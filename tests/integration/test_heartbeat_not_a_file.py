"""``vigil health`` (the container's HEALTHCHECK) and ``vigil status`` over a heartbeat that is no
small regular file: a FIFO (a mistaken ``mkfifo``), or a sparse file of gigabytes. The heartbeat
was read with a plain ``read_bytes``: the FIFO hung both commands until someone wrote to it, and
the sparse file was read whole. Each is now unhealthy, naming the file and what is wrong."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fakes.fifo import outcome_beside_fifo

from runner.cli import main


@pytest.mark.parametrize("command", ["health", "status"])
def test_a_fifo_at_the_heartbeat_is_unhealthy_not_a_hang(
    tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    beat = tmp_path / "heartbeat"
    os.mkfifo(beat)
    code = outcome_beside_fifo(lambda: main(["--state-dir", str(tmp_path), command]), beat)
    assert code == 1
    assert f"{beat} is not a regular file (a FIFO)" in capsys.readouterr().out


def test_a_heartbeat_of_gigabytes_is_not_read_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    beat = tmp_path / "heartbeat"
    beat.write_text("{}")
    os.truncate(beat, 2 << 30)
    assert main(["--state-dir", str(tmp_path), "health"]) == 1
    out = capsys.readouterr().out
    assert "cannot read heartbeat" in out and "over the" in out
