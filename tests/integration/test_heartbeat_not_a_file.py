"""``vigil health`` (the container's HEALTHCHECK) and ``vigil status`` over a heartbeat that is no
small regular file: a FIFO (a mistaken ``mkfifo``), or a sparse file of gigabytes. The heartbeat
was read with a plain ``read_bytes``: the FIFO hung both commands until someone wrote to it, and
the sparse file was read whole. Each is now unhealthy, naming the file and what is wrong."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fakes.fifo import outcome_beside_fifo
from fakes.heartbeat import write_beat

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


NOT_A_BEAT = [
    (b"\x8f\x03\xd1 random bytes \xff", "not UTF-8 text"),
    (b"{}", "at_ms is missing"),
    (b"[1, 2]", "a JSON array, not an object"),
    (b'{"at_ms": "soon", "pid": 7}', 'at_ms is "soon", not a time'),
    (b'{"at_ms": 99999999999999999999, "pid": 7}', "at_ms is 99999999999999999999, not a time"),
    (b'{"at_ms": 1740787200000, "pid": true}', "pid is true, not a process id"),
]


@pytest.mark.parametrize("command", ["health", "status"])
@pytest.mark.parametrize(("body", "why"), NOT_A_BEAT)
def test_a_fresh_file_that_is_no_beat_is_unhealthy(
    tmp_path: Path, command: str, body: bytes, why: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Such a file, just written, was read as a fresh beat without details: a dead daemon's
    container stayed healthy for as long as the junk was fresh."""
    beat = tmp_path / "heartbeat"
    beat.write_bytes(body)
    assert main(["--state-dir", str(tmp_path), command]) == 1
    assert f"heartbeat {beat} is not a heartbeat: {why}" in capsys.readouterr().out


def test_a_beat_the_daemon_wrote_is_healthy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_beat(tmp_path / "heartbeat")
    assert main(["--state-dir", str(tmp_path), "health"]) == 0
    assert capsys.readouterr().out.startswith("healthy: heartbeat")
