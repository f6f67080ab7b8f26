"""``vigil report`` on a run folder whose ``replay.json`` is a gigabyte (zeros a crash left, here
a sparse file): it was read whole to find it is no JSON, that gigabyte taken on the way. At most
``FILE_MAX_BYTES`` is read now (as the API's summary reads it): the report is written, its
parameters "n/a" with the reason naming the file.

The report runs in a child process whose address space is capped: the old read died there of
``MemoryError`` instead of taking the machine's memory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakes.capped_child import CLI, GIGABYTE, run_capped, sparse_size
from fakes.report_support import write_run

_MEMORY_LIMIT = 1 << 30


@pytest.mark.timeout(120)
def test_a_replay_json_of_a_gigabyte_is_not_read_whole(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run")
    replay = run / "replay.json"
    sparse_size(replay, GIGABYTE)
    argv = ["--state-dir", str(tmp_path / "state"), "report", str(run)]
    done = run_capped(CLI, *argv, limit_bytes=_MEMORY_LIMIT)
    assert done.returncode == 0, done.stderr[-3000:]
    parameters = json.loads((run / "report.json").read_text())["parameters"]
    assert "replay.json" in json.dumps(parameters["unavailable"]), parameters
