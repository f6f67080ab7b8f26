"""What a run's folder holds may be of any size: a failed run's reason quotes the last lines of
its replay.log (the replay's own output, as long as the run made it), and only its end is read
for them; job.json, report.json and replay.json past a ceiling are not read."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from fakes.allocation_peak import allocation_peak
from fakes.api_support import default_settings

from api.runs import RunLimits, RunQueue
from api.runs_models import RunRequest
from runner.config import Settings

DAY = "2025-03-02"
HUGE_FILE_BYTES = 512 << 20  # sparse, as LOG_BYTES
LOG_BYTES = 128 << 20  # sparse: no disk is used for it (2 GB: the old reader OOM-killed)


@pytest.fixture
def settings(tmp_path: Path) -> Iterator[Settings]:
    with default_settings(tmp_path) as defaults:
        yield defaults


class LongLogLauncher:
    """A child whose output is LOG_BYTES of zeros, then its last words, and exit 1."""

    def argv(self, request: RunRequest, out_dir: Path) -> Sequence[str]:
        code = (
            f"import os; os.ftruncate(1, {LOG_BYTES}); os.lseek(1, 0, 2);"
            " os.write(1, b'\\nloading\\nreplay stopped: boom\\n'); raise SystemExit(1)"
        )
        return [sys.executable, "-c", code]


@pytest.mark.timeout(120)
async def test_a_failed_runs_reason_reads_only_the_end_of_a_huge_log(settings: Settings) -> None:
    """_tail read the whole replay.log as text on the event loop (the API's, or an inline
    daemon's) to keep its last three lines: a log of 2 GB took all of this 24 GB machine's
    memory until the OOM killer ended the process. It reads the log's last 64 kB."""
    queue = RunQueue(settings.state_dir, LongLogLauncher(), RunLimits())
    workers = asyncio.create_task(queue.run())
    try:
        with allocation_peak() as allocated:
            job = queue.submit(RunRequest.model_validate({"from": DAY, "to": DAY}))
            async with asyncio.timeout(100):
                while (found := queue.get(job.run_id)) is None or found.status != "failed":
                    await asyncio.sleep(0.05)
    finally:
        workers.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await workers
    assert found.reason is not None and found.reason.endswith("loading | replay stopped: boom")
    assert allocated.peak_bytes < LOG_BYTES // 4


@pytest.mark.parametrize("which", ["job.json", "report.json", "replay.json"])
def test_a_huge_file_in_a_run_folder_is_not_read_whole(settings: Settings, which: str) -> None:
    """job.json (every run's, at each start) and the report and replay files (for the summary of
    a job left running, then of each job as it ends, on the event loop) were read and parsed
    whole: a damaged 512 MB one cost the process gigabytes at every start. Over FILE_MAX_BYTES
    a job.json is skipped and a report leaves the summary unavailable, saying why."""
    queue = RunQueue(settings.state_dir, LongLogLauncher(), RunLimits())
    job = queue.submit(RunRequest.model_validate({"from": DAY, "to": DAY}))
    folder = Path(job.out_dir)
    job_file = folder / "job.json"
    job_file.write_text(json.dumps(json.loads(job_file.read_text()) | {"status": "running"}))
    (folder / "report.json").write_text('{"metrics": {}, "deciders": []}')
    (folder / which).write_bytes(b" ")
    os.truncate(folder / which, HUGE_FILE_BYTES)
    with allocation_peak() as allocated:
        found = RunQueue(settings.state_dir, LongLogLauncher(), RunLimits()).get(job.run_id)
    assert allocated.peak_bytes < HUGE_FILE_BYTES // 4
    if which == "job.json":
        assert found is None
        return
    assert found is not None and found.status == "failed"
    if which == "report.json":
        assert found.summary is None and "over the" in found.unavailable["summary"]
    else:
        assert found.summary is not None and "replay.json" in found.summary.unavailable["finished"]
