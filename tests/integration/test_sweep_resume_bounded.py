"""A sweep's resume reading a run folder whose ``report.json`` (or ``replay.json``) is a gigabyte
(a crash's zeros, here a sparse file): ``core.jsonread.read_json_object`` read it whole to find
it is no JSON, that gigabyte taken on the way, once per run at every resume and again for the
experiment's table. At most 64 MiB is read now, as the API's run summaries and the report's
parameters read these files: the run is one to redo.

The resume runs in a child process whose address space is capped: the old read died there of
``MemoryError`` instead of taking the machine's memory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakes.capped_child import GIGABYTE, run_capped, sparse_size

_MEMORY_LIMIT = 1 << 30
_IS_DONE = (
    "import sys\nfrom pathlib import Path\nfrom runner.sweep.worker import is_done\n"
    "print('done' if is_done(Path(sys.argv[1])) else 'to redo')\n"
)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("huge", ["report.json", "replay.json"])
def test_a_run_file_of_a_gigabyte_is_a_run_to_redo_not_read_whole(
    tmp_path: Path, huge: str
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "replay.json").write_text(json.dumps({"finished": True}))
    (run / "report.json").write_text(json.dumps({"figures": {}}))
    sparse_size(run / huge, GIGABYTE)
    done = run_capped(_IS_DONE, str(run), limit_bytes=_MEMORY_LIMIT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "to redo"
