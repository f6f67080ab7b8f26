"""A sweep run's folder that is not a folder the worker can clear (a file or a link in its place,
a person's or another program's): the run fails with that reason and what is there is kept. The
task raised instead, so the sweep recorded the run as 'worker lost'."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes.disk_full import disk_full_after

from market.recorded import default_data_dir
from runner.config import Settings
from runner.sweep.grid import Grid, RunSpec, expand
from runner.sweep.worker import FAILED_FILE, run_one


def _one_day_run(settings: Settings) -> RunSpec:
    """The sweep's first run of BTC/USDT on 2025-03-01."""
    grid = Grid.model_validate(
        {"periods": [["2025-03-01", "2025-03-01"]], "tickers": [["BTC/USDT"]]}
    )
    [spec, *_] = expand(grid, {"base": settings}, default_data_dir())
    return spec


@pytest.mark.parametrize("kind", ["file", "link", "dangling link"])
def test_a_run_folder_that_cannot_be_cleared_fails_the_run_and_is_kept(
    tmp_path: Path, kind: str
) -> None:
    settings = Settings()
    spec = _one_day_run(settings)
    runs = tmp_path / "runs"
    runs.mkdir()
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep\n")
    if kind == "file":
        (runs / spec.key).write_text("keep\n")
    else:
        (runs / spec.key).symlink_to(mine if kind == "link" else tmp_path / "gone")
    record = run_one(spec.model_dump(mode="json"), settings, str(runs))
    assert record["status"] == "failed" and record["key"] == spec.key
    assert f"{runs / spec.key}" in record["reason"]
    assert (mine / "notes.txt").read_text() == "keep\n"
    if kind == "file":
        assert (runs / spec.key).read_text() == "keep\n"
    else:
        assert (runs / spec.key).is_symlink()


def test_a_failed_run_whose_failed_json_cannot_be_written_still_reports_its_reason(
    tmp_path: Path,
) -> None:
    """A full disk fails the replay and then its failed.json: the write's OSError left the task
    (the sweep said 'worker lost', the replay's own reason gone); the run now fails with that
    reason and says the file was not written."""
    settings = Settings()
    spec = _one_day_run(settings)
    runs = tmp_path / "runs"
    runs.mkdir()
    with disk_full_after(0):
        record = run_one(spec.model_dump(mode="json"), settings, str(runs))
    assert record["status"] == "failed" and record["key"] == spec.key
    assert FAILED_FILE in record["reason"] and "not written" in record["reason"]
    assert not (runs / spec.key / FAILED_FILE).exists()
