"""What ``vigil --help`` and a command's ``--help`` say, against what the command does.
``vigil health`` said "exit 0 if the daemon's heartbeat is fresh, else 1", but it also fails on
market data gone stale, a journal it cannot write and halted trading (README, ``check_health``),
and ``vigil sim --help`` gave no default port (README runs ``vigil sim --port 8765``)."""

from __future__ import annotations

import pytest

from runner.commands import main


def _help(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    with pytest.raises(SystemExit) as done:
        main([*args, "--help"])
    assert done.value.code == 0
    return " ".join(capsys.readouterr().out.split())  # argparse's wrapping undone


def test_health_names_every_problem_it_reports(capsys: pytest.CaptureFixture[str]) -> None:
    for text in (_help(capsys), _help(capsys, "health")):
        assert "a fresh heartbeat, market data, a journal it can write, trading not halted" in text


def test_sim_says_its_default_port(capsys: pytest.CaptureFixture[str]) -> None:
    assert "--port PORT websocket port (default 8765)" in _help(capsys, "sim")
