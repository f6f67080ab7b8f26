"""A finished run's report is read off the event loop: the runs queue lives in the daemon's
process, and reading a report.json of a year's replay (about 26 MB) took over a second, during
which the daemon handled no tick and no stop."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from pathlib import Path

import pytest
from test_api_runs import WAIT_SECS, ScriptLauncher

import api.runs
from api.runs import RunLimits, RunQueue
from api.runs_models import FINISHED, RunRequest, RunSummary
from api.runs_summary import read_summary

REPORT = "report.json"


@pytest.mark.timeout(WAIT_SECS + 60)
async def test_a_finished_runs_report_is_read_in_a_thread_not_on_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    readers: list[int] = []

    def observed(run_dir: Path) -> tuple[RunSummary | None, str]:
        readers.append(threading.get_ident())
        return read_summary(run_dir)

    monkeypatch.setattr(api.runs, "read_summary", observed)
    queue = RunQueue(tmp_path / "state", ScriptLauncher("pass"), RunLimits())
    workers = asyncio.create_task(queue.run())
    try:
        request = RunRequest.model_validate(
            {"tickers": ["BTC/USDT"], "from": "2025-03-02", "to": "2025-03-02"}
        )
        run_id = queue.submit(request).run_id
        async with asyncio.timeout(WAIT_SECS):
            while (job := queue.get(run_id)) is None or job.status not in FINISHED:
                await asyncio.sleep(0.05)  # the child process runs in real time
    finally:
        workers.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await workers
    assert job.status == "done" and job.summary is None
    assert REPORT in job.unavailable["summary"]  # the child wrote none, and the job says so
    assert readers, "the summary was not read"
    assert threading.get_ident() not in readers, "the report was read on the event loop"
