"""A run the worker finished whose folder is gone or changed by the time the sweep writes its
report (removed by a person, or ``--out`` not on storage the workers share): the report lists it
as failed with that reason. It was listed failed with no reason at all."""

from __future__ import annotations

import importlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dask.typing import Key
from distributed.diagnostics.plugin import SchedulerPlugin
from distributed.scheduler import TaskStateState as SchedulerTaskStateState

from runner.cli import main

GRID = 'periods = [["2025-03-01", "2025-03-01"]]\ntickers = [["BTC/USDT"]]\nmemory = [true]\n'


class _RemoveFinishedRuns(SchedulerPlugin):
    """A scheduler plugin: the moment a run's task is finished, its folder is removed."""

    def __init__(self, runs: Path) -> None:
        super().__init__()
        self.runs = runs

    def transition(
        self,
        key: Key,
        start: SchedulerTaskStateState,
        finish: SchedulerTaskStateState,
        *args: Any,
        stimulus_id: str,
        **kwargs: Any,
    ) -> None:
        if finish == "memory" and str(key).startswith("vigil-run-"):
            shutil.rmtree(self.runs / str(key).removeprefix("vigil-run-"))


@pytest.fixture
def cluster() -> Iterator[Any]:
    """A real Dask scheduler and one single-threaded worker, in this process, on loopback."""
    distributed = importlib.import_module("dask.distributed")
    with distributed.LocalCluster(
        n_workers=1,
        threads_per_worker=1,
        processes=False,
        protocol="tcp",
        host="127.0.0.1",
        dashboard_address=None,
    ) as local:
        yield local


@pytest.mark.timeout(300)
def test_a_finished_run_whose_folder_is_gone_is_reported_failed_with_why(
    tmp_path: Path, cluster: Any
) -> None:
    grid, out = tmp_path / "grid.toml", tmp_path / "out"
    grid.write_text(GRID)
    cluster.scheduler.add_plugin(_RemoveFinishedRuns(out / "runs"), name="remove-runs")
    assert (
        main(["sweep", str(grid), "--out", str(out), "--scheduler", cluster.scheduler_address]) == 1
    )
    [failed] = json.loads((out / "experiment.json").read_text())["failed"]
    assert failed["status"] == "failed"
    assert f"{failed['run_dir']} holds no finished replay" in (failed["reason"] or "")
