"""A sweep folder whose run folder holds another run (copied or moved there by hand, another
tool's folder under a sweep's key): on resume it is not done, it is run, instead of being skipped
and counted in the report as the run its key names (the same figures twice, as two seeds)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from fakes.report_support import write_run

from market.recorded import default_data_dir
from report.html import write_report
from runner.cli import main
from runner.sweep.grid import RunSpec, expand, load_grid, variant_settings

GRID = (
    'periods = [["2025-03-01", "2025-03-01"]]\ntickers = [["BTC/USDT"]]\nmemory = [true]\n'
    "seeds = [42, 7]\n"
)


def _finished_run(run_dir: Path, spec: RunSpec) -> None:
    """A finished replay of ``spec`` (its replay.json as the replay writes one) with its report."""
    write_run(run_dir)
    write_report(run_dir)
    options = spec.options(run_dir.parent)
    facts = {
        "from_ms": options.start_ms,
        "to_ms": options.end_ms,
        "tickers": list(spec.tickers),
        "decider": spec.decider,
        "memory": spec.memory,
        "seed": spec.seed,
        "data_dir": spec.data_dir,
        "finished": True,
        "loop_failures": {},
    }
    (run_dir / "replay.json").write_text(json.dumps(facts))


@pytest.mark.timeout(300)
def test_a_run_folder_holding_another_run_is_run_again(tmp_path: Path) -> None:
    grid, out = tmp_path / "grid.toml", tmp_path / "out"
    grid.write_text(GRID)
    loaded = load_grid(grid)
    first, second = expand(loaded, variant_settings({}, loaded), default_data_dir())
    runs = out / "runs"
    _finished_run(runs / first.key, first)
    shutil.copytree(runs / first.key, runs / second.key)  # seed 42's run, filed as seed 7's
    assert main(["sweep", str(grid), "--out", str(out), "--workers", "1"]) == 0
    replayed = json.loads((runs / second.key / "replay.json").read_text())
    assert replayed["seed"] == second.seed == 7
    assert json.loads((runs / first.key / "replay.json").read_text())["seed"] == 42
    status = {run["key"]: run for run in json.loads((out / "sweep.json").read_text())["runs"]}
    assert status[first.key]["skipped"] is True and status[second.key]["skipped"] is False
