"""``replay.json`` (what a replay was asked and how it went) was written by name into the run's
folder, which the API makes before its replay runs: a symlink planted there (dangling or not) was
followed, so the replay's facts overwrote the file it named, or made one where it pointed. It now
goes to a fresh temporary name renamed into place, the link replaced, never followed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

_REPO = Path(__file__).resolve().parents[2]
_DAY = "2025-03-02"
_VICTIM = b'{"cash": 10000}\n'


@pytest.mark.timeout(300)
def test_a_symlink_at_replay_json_is_replaced_not_followed(tmp_path: Path) -> None:
    victim = tmp_path / "runner_state.json"
    victim.write_bytes(_VICTIM)
    out = tmp_path / "run"
    out.mkdir()
    (out / "replay.json").symlink_to(victim)
    argv = ["--state-dir", str(tmp_path / "state"), "replay", "--from", _DAY, "--to", _DAY]
    argv += ["--out", str(out), "--tickers", "BTC/USDT"]
    done = subprocess.run(
        [sys.executable, "-m", "runner.cli", *argv],
        cwd=_REPO,
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert victim.read_bytes() == _VICTIM
    assert not (out / "replay.json").is_symlink()
    assert json.loads((out / "replay.json").read_text())["finished"] is True
