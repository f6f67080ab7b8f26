"""``vigil run --speed 600 --start ...`` without ``--sim``: both are the simulator's, and the daemon
took them silently and traded live market data in real time (an operator who forgot ``--sim`` got
Binance, not the replayed June). A usage error now, unless the config makes the simulator the
market (``market.source = "sim"``), where they apply as with ``--sim``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.errors import EXIT_USAGE

REPO = Path(__file__).resolve().parents[2]


def _vigil(state_dir: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    # a child process: before the check this started a live daemon, which the timeout ended
    done = subprocess.run(
        [sys.executable, "-m", "runner.cli", "--state-dir", str(state_dir), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, **(env or {})},
    )
    return done.returncode, done.stderr


@pytest.mark.parametrize(
    "flags", [("--speed", "600"), ("--start", "2025-06-01T00:00:00Z"), ("--speed", "6", "--live")]
)
def test_simulator_flags_without_sim_are_a_usage_error(tmp_path: Path, flags: tuple[str]) -> None:
    code, stderr = _vigil(tmp_path / "state", "run", *flags)
    assert code == EXIT_USAGE
    assert stderr.strip().splitlines() == [
        f'vigil run: {flags[0]} is the simulator\'s: add --sim (or set market.source = "sim")'
    ]
    assert not (tmp_path / "state").exists()  # nothing started


def test_a_configured_simulator_takes_them(tmp_path: Path) -> None:
    # the check passes: the start outside the recording is the simulator's own refusal
    code, stderr = _vigil(
        tmp_path / "state",
        "run",
        "--start",
        "2030-01-01T00:00:00Z",
        env={"VIGIL_MARKET__SOURCE": "sim"},
    )
    assert code == 78 and "outside the recording" in stderr
