"""A sweep.json that cannot be rewritten mid-sweep (a full disk: the rewrite after a run fails
with ENOSPC): the sweep goes on, says so and ends with exit 1, every finished run kept and
reported, instead of an OSError traceback that stopped the cluster with runs still to go."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest
from test_sweep_copied_run import GRID, _finished_run

import runner.sweep.engine
import state.atomic
from market.recorded import default_data_dir
from runner.cli import main
from runner.sweep.grid import expand, load_grid, variant_settings
from runner.sweep.worker import is_done


@pytest.mark.timeout(300)
def test_a_sweep_json_that_fails_mid_sweep_loses_no_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    grid, out = tmp_path / "grid.toml", tmp_path / "out"
    grid.write_text(GRID)
    loaded = load_grid(grid)
    first, second = expand(loaded, variant_settings({}, loaded), default_data_dir())
    _finished_run(out / "runs" / first.key, first)
    real = state.atomic.atomic_write_bytes
    writes: list[Path] = []

    def disk_fills_after_the_first(path: Path, data: bytes) -> object:
        writes.append(path)
        if len(writes) > 1:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real(path, data)

    monkeypatch.setattr(runner.sweep.engine, "atomic_write_bytes", disk_fills_after_the_first)
    code = main(["sweep", str(grid), "--out", str(out), "--workers", "1"])
    err = capsys.readouterr().err
    assert code == 1, err
    assert len(writes) > 1  # the rewrite after the run was tried, and failed
    assert f"cannot write {out / 'sweep.json'}" in err and "Traceback" not in err
    assert is_done(out / "runs" / second.key, second)
    assert "sweep: 2 done, 0 failed; report:" in err
    assert json.loads((out / "experiment.json").read_text())["done"] == 2
