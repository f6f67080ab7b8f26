"""After a run has finished: its report is read off the event loop, and removing its folder
deletes it.

- The runs queue lives in the daemon's process, and reading a report.json of a year's replay
  (about 26 MB) on its loop took over a second, during which the daemon handled no tick and no stop.
- A person deletes a run by removing its folder; the API listed it as done, its report gone,
  until it restarted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from fakes.api_support import serve_api
from test_api_runs import WAIT_SECS, ScriptLauncher

import api.runs
from api.runs import RunLimits, RunQueue
from api.runs_models import FINISHED, RunBody, RunRequest, RunSummary
from api.runs_routes import run_routes
from api.runs_summary import read_summary

REPORT = "report.json"

pytestmark = pytest.mark.timeout(WAIT_SECS + 60)


@contextlib.asynccontextmanager
async def running(queue: RunQueue) -> AsyncIterator[None]:
    workers = asyncio.create_task(queue.run())
    try:
        yield
    finally:
        workers.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await workers


async def finished_run(queue: RunQueue) -> RunBody:
    """A run of a child that exits at once (it writes no report), once it has finished."""
    request = RunRequest.model_validate(
        {"tickers": ["BTC/USDT"], "from": "2025-03-02", "to": "2025-03-02"}
    )
    run_id = queue.submit(request).run_id
    async with asyncio.timeout(WAIT_SECS):
        while (job := queue.get(run_id)) is None or job.status not in FINISHED:
            await asyncio.sleep(0.05)  # the child process runs in real time
    return job


async def test_a_finished_runs_report_is_read_in_a_thread_not_on_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    readers: list[int] = []

    def observed(run_dir: Path) -> tuple[RunSummary | None, str]:
        readers.append(threading.get_ident())
        return read_summary(run_dir)

    monkeypatch.setattr(api.runs, "read_summary", observed)
    queue = RunQueue(tmp_path / "state", ScriptLauncher("pass"), RunLimits())
    async with running(queue):
        job = await finished_run(queue)
    assert job.status == "done" and job.summary is None
    assert REPORT in job.unavailable["summary"]  # the child wrote none, and the job says so
    assert readers, "the summary was not read"
    assert threading.get_ident() not in readers, "the report was read on the event loop"


async def test_a_finished_run_whose_folder_was_removed_is_forgotten(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="api.runs")
    state_dir = tmp_path / "state"
    state_dir.mkdir()  # the API writes its api.json there
    queue = RunQueue(state_dir, ScriptLauncher("pass"), RunLimits())
    async with running(queue), serve_api(state_dir, extensions=[run_routes(queue)]) as api:
        kept, removed = await finished_run(queue), await finished_run(queue)
        shutil.rmtree(removed.out_dir)
        one_code, _ = await api.get(f"/api/runs/{removed.run_id}")
        list_code, listing = await api.get("/api/runs")
        kept_code, _ = await api.get(f"/api/runs/{kept.run_id}")
    assert one_code == 404
    assert list_code == 200 and isinstance(listing, dict)
    assert [run["run_id"] for run in listing["runs"]] == [kept.run_id]
    assert kept_code == 200
    said = [r.getMessage() for r in caplog.records if "is forgotten" in r.getMessage()]
    assert said == [f"run {removed.run_id}: its folder {removed.out_dir} was removed; "
                    "the run is forgotten"]  # fmt: skip
