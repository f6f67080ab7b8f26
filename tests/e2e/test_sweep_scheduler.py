"""``vigil sweep --scheduler`` on a real Dask cluster: a ``dask scheduler`` and a ``dask worker``
process on loopback, started as the README says. Its runs equal the same replays run one by one,
byte for byte (as the LocalCluster's do, ``test_sweep``), and a second sweep on the same cluster
skips them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_sweep import REPO, assert_runs_equal_one_by_one, environment

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

GRID = """
periods = [["2025-03-02", "2025-03-02"]]
tickers = [["BTC/USDT"]]
deciders = ["fallback"]
memory = [true, false]
seeds = [42]
"""
DASK = Path(sys.executable).parent / "dask"
START_SECS = 120.0  # a scheduler writes its address within seconds; a loaded machine, longer


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)  # the worker's nanny and its worker process too
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _address(path: Path) -> str | None:
    """The address in a scheduler file, once it is written whole."""
    try:
        return str(json.loads(path.read_text())["address"])
    except (OSError, ValueError, KeyError):
        return None


@pytest.fixture
def scheduler(tmp_path: Path) -> Iterator[str]:
    """The address of a running ``dask scheduler`` with one single-threaded ``dask worker``."""
    address_file, log_path = tmp_path / "scheduler.json", tmp_path / "dask.log"
    started: list[subprocess.Popen[bytes]] = []
    with log_path.open("wb") as log:

        def spawn(*args: str) -> subprocess.Popen[bytes]:
            process = subprocess.Popen(
                [DASK, *args, "--no-dashboard"], stdout=log, stderr=log, start_new_session=True
            )
            started.append(process)
            return process

        try:
            scheduler = spawn("scheduler", "--host", "127.0.0.1", "--port", "0",
                              "--scheduler-file", str(address_file))  # fmt: skip
            deadline = time.monotonic() + START_SECS
            while (address := _address(address_file)) is None:
                assert scheduler.poll() is None, log_path.read_text()
                assert time.monotonic() < deadline, "the scheduler wrote no address"
                time.sleep(0.1)
            assert address.startswith("tcp://127.0.0.1:")
            spawn("worker", address, "--nthreads", "1")
            yield address
        finally:
            for process in reversed(started):
                _stop(process)


def sweep(
    grid: Path, out: Path, address: str, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runner.cli", "sweep", str(grid), "--out", str(out),
         "--scheduler", address],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip


def test_a_sweep_on_a_dask_scheduler_equals_the_runs_one_by_one(
    tmp_path: Path, scheduler: str
) -> None:
    grid, out = tmp_path / "grid.toml", tmp_path / "sweep"
    grid.write_text(GRID)
    env = environment(tmp_path / "vigil.toml")

    first = sweep(grid, out, scheduler, env)

    assert first.returncode == 0, first.stderr
    assert f"sweep: 2 runs, 0 already done, 2 to run on {scheduler}" in first.stderr
    assert json.loads((out / "experiment.json").read_text())["done"] == 2
    again = sweep(grid, out, scheduler, env)
    assert again.returncode == 0, again.stderr
    assert "2 already done, 0 to run" in again.stderr

    assert_runs_equal_one_by_one(grid, out, tmp_path)
