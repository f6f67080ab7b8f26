"""A failed run's reason quotes the last lines of its replay.log. The log is the replay's own
output, as long as the run made it: only its end is read for them."""

from __future__ import annotations

import asyncio
import contextlib
import resource
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from fakes.api_support import default_settings

from api.runs import RunLimits, RunQueue
from api.runs_models import RunRequest
from runner.config import Settings

DAY = "2025-03-02"
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


def peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: kilobytes


@pytest.mark.timeout(120)
async def test_a_failed_runs_reason_reads_only_the_end_of_a_huge_log(settings: Settings) -> None:
    """_tail read the whole replay.log as text on the event loop (the API's, or an inline
    daemon's) to keep its last three lines: a log of 2 GB took all of this 24 GB machine's
    memory until the OOM killer ended the process. It reads the log's last 64 kB."""
    queue = RunQueue(settings.state_dir, LongLogLauncher(), RunLimits())
    workers = asyncio.create_task(queue.run())
    before = peak_rss_bytes()
    try:
        job = queue.submit(RunRequest.model_validate({"from": DAY, "to": DAY}))
        async with asyncio.timeout(100):
            while (found := queue.get(job.run_id)) is None or found.status != "failed":
                await asyncio.sleep(0.05)
    finally:
        workers.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await workers
    assert found.reason is not None and found.reason.endswith("loading | replay stopped: boom")
    assert peak_rss_bytes() - before < LOG_BYTES // 4
