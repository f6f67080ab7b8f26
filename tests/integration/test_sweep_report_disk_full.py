"""A sweep whose sweep.json or experiment report cannot be written (a full disk, here a real short
write under RLIMIT_FSIZE): refused before any run, or said at the end with exit 1 and the runs
kept, instead of ending in an OSError traceback."""

from __future__ import annotations

import json
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from test_sweep_copied_run import GRID, _finished_run

from market.recorded import default_data_dir
from runner.sweep.grid import expand, load_grid, variant_settings

REPO = Path(__file__).resolve().parents[2]
#: sweep.json of two runs fits (about 1.3 KB), experiment.json (about 3 KB) does not
LIMIT_BYTES = 2048


def _limit_file_size(limit: int = LIMIT_BYTES) -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails, not the process
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


@pytest.mark.timeout(120)
def test_a_report_that_cannot_be_written_is_said_and_the_runs_kept(tmp_path: Path) -> None:
    grid, out = tmp_path / "grid.toml", tmp_path / "out"
    grid.write_text(GRID)
    loaded = load_grid(grid)
    specs = expand(loaded, variant_settings({}, loaded), default_data_dir())
    for spec in specs:  # every run done: the sweep only writes sweep.json and its report
        _finished_run(out / "runs" / spec.key, spec)
    done = subprocess.run(
        [sys.executable, "-m", "runner.cli", "sweep", str(grid), "--out", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=100, check=False,
        preexec_fn=_limit_file_size,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert f"cannot write the experiment report in {out}" in done.stderr
    assert json.loads((out / "sweep.json").read_text())["runs"][0]["status"] == "done"
    assert not (out / "experiment.json").exists()
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.timeout(120)
def test_a_sweep_json_that_cannot_be_written_refuses_before_any_run(tmp_path: Path) -> None:
    grid, out = tmp_path / "grid.toml", tmp_path / "out"
    grid.write_text(GRID)
    done = subprocess.run(
        [sys.executable, "-m", "runner.cli", "sweep", str(grid), "--out", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=100, check=False,
        preexec_fn=lambda: _limit_file_size(256),
    )  # fmt: skip
    assert done.returncode == 78, done.stderr
    assert "Traceback" not in done.stderr
    assert f"--out {out}: cannot write {out / 'sweep.json'}" in done.stderr
    assert not list((out / "runs").iterdir())
