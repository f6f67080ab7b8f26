"""``vigil sweep`` on a 2-worker Dask LocalCluster: killed midway it resumes without redoing the
finished runs, and its 8 runs equal the same 8 replays run one by one, byte for byte."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from replay_support import (
    DETERMINISTIC_FILES,
    default_settings,
    isolated_environment,
    replay_in_process,
)

from market.recorded import default_data_dir
from runner.sweep.grid import expand, load_grid, variant_settings
from runner.sweep.worker import is_done

REPO = Path(__file__).resolve().parents[2]
GRID = """
periods = [["2025-03-02", "2025-03-02"], ["2025-04-02", "2025-04-02"]]
tickers = [["BTC/USDT"]]
deciders = ["fallback"]
memory = [true, false]
seeds = [42, 7]
"""
RUNS = 8
KILL_AFTER_DONE = 2
TIMEOUT_SECS = 600


def sweep_command(grid: Path, out: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "runner.cli",
        "sweep",
        str(grid),
        "--out",
        str(out),
        "--workers",
        "2",
    ]


def environment(config: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VIGIL_")}
    env.pop("ANTHROPIC_API_KEY", None)
    config.write_text("# empty: the defaults\n")
    return env | {"VIGIL_CONFIG_FILE": str(config)}


def done_runs(runs_dir: Path) -> set[str]:
    if not runs_dir.is_dir():
        return set()
    return {p.name for p in runs_dir.iterdir() if is_done(p)}


@pytest.mark.timeout(3 * TIMEOUT_SECS)  # two sweeps of 8 replays plus the 8 one by one
def test_a_killed_sweep_resumes_and_equals_the_runs_one_by_one(tmp_path: Path) -> None:
    grid, out = tmp_path / "grid.toml", tmp_path / "sweep"
    grid.write_text(GRID)
    env = environment(tmp_path / "vigil.toml")
    log = (tmp_path / "first.log").open("wb")
    first = subprocess.Popen(
        sweep_command(grid, out),
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=log,
        start_new_session=True,  # the sweep, its scheduler and its worker processes: one group
    )
    deadline = time.monotonic() + TIMEOUT_SECS
    try:
        while len(done_runs(out / "runs")) < KILL_AFTER_DONE:
            assert first.poll() is None, (tmp_path / "first.log").read_text()
            assert time.monotonic() < deadline, "no run finished in time"
            time.sleep(0.2)
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
    finished_before = done_runs(out / "runs")
    assert KILL_AFTER_DONE <= len(finished_before) < RUNS
    stamps = {
        key: (out / "runs" / key / "logs" / "decisions.jsonl").stat().st_mtime_ns
        for key in finished_before
    }

    second = subprocess.run(
        sweep_command(grid, out),
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_SECS,
        check=False,
    )
    assert second.returncode == 0, second.stderr
    assert (
        f"{len(finished_before)} already done, {RUNS - len(finished_before)} to run"
        in second.stderr
    )
    assert done_runs(out / "runs") == {
        r["key"] for r in json.loads((out / "sweep.json").read_text())["runs"]
    }
    for key, stamp in stamps.items():  # not redone
        assert (out / "runs" / key / "logs" / "decisions.jsonl").stat().st_mtime_ns == stamp
    experiment = json.loads((out / "experiment.json").read_text())
    assert experiment["done"] == RUNS and experiment["failed"] == []
    assert (out / "experiment.html").is_file()

    assert_runs_equal_one_by_one(grid, out, tmp_path)


def assert_runs_equal_one_by_one(grid: Path, out: Path, tmp_path: Path) -> None:
    """Each run of the sweep in ``out`` equals the same replay run alone in this process, file
    for file and byte for byte."""
    settings = default_settings(tmp_path)
    with isolated_environment(tmp_path):
        variants = variant_settings({}, load_grid(grid))
    assert variants["base"].digest() == settings.digest()
    for spec in expand(load_grid(grid), variants, default_data_dir()):
        alone = spec.options(tmp_path / "alone")
        assert replay_in_process(settings, alone).passed
        assert (out / "runs" / spec.key / "logs" / "decisions.jsonl").stat().st_size > 0
        for name in DETERMINISTIC_FILES:  # the learner's file exists only once a trade closed
            swept, single = out / "runs" / spec.key / name, alone.out_dir / name
            assert swept.is_file() == single.is_file(), (spec.key, name)
            if swept.is_file():
                assert swept.read_bytes() == single.read_bytes(), (spec.key, name)
