"""``/api/runs`` when a job's files cannot be written (a full disk, a file where the runs folder
should be, a folder in place of a job's file): the client is told why, nothing is counted that
will not run, and the workers go on with the next job. Real uvicorn on loopback, real children.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import sys
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path

import pytest
from fakes.api_support import Served, default_settings, serve_api
from fakes.disk_full import disk_full_after
from fakes.log_records import tracebacks
from test_api_runs import post, until_finished

from api.runs import JOB_FILE_NAME, RunLimits, RunQueue
from api.runs_models import RunRequest
from api.runs_routes import run_routes
from runner.config import Settings

DAY = "2025-03-02"
WAIT_SECS = 60.0  # a generous bound on a loaded machine; the waits end on the condition
JOB = {"from": DAY, "to": DAY}


@pytest.fixture
def settings(tmp_path: Path) -> Iterator[Settings]:
    with default_settings(tmp_path) as defaults:
        yield defaults


class GateLauncher:
    """A child that waits until ``gate`` exists, then exits 0."""

    def __init__(self, gate: Path) -> None:
        self.gate = gate

    def argv(self, request: RunRequest, out_dir: Path) -> Sequence[str]:
        code = "import pathlib, sys, time\nwhile not pathlib.Path(sys.argv[1]).exists(): time.sleep(0.02)"
        return [sys.executable, "-c", code, str(self.gate)]


@contextlib.asynccontextmanager
async def serving(
    queue: RunQueue, state_dir: Path
) -> AsyncIterator[tuple[Served, asyncio.Task[None]]]:
    workers = asyncio.create_task(queue.run())
    try:
        async with serve_api(state_dir, extensions=[run_routes(queue)]) as api:
            yield api, workers
    finally:
        workers.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await workers


async def test_a_runs_folder_that_cannot_be_made_is_507_and_counts_nothing(
    settings: Settings,
) -> None:
    """A file where runs/ should be: the mkdir's OSError was a bare 500."""
    runs = settings.state_dir / "runs"
    runs.write_text("not a folder")
    gate = settings.state_dir / "gate"
    gate.touch()
    queue = RunQueue(settings.state_dir, GateLauncher(gate), RunLimits(queue_size=0))
    async with serving(queue, settings.state_dir) as (api, _):
        code, refused = await post(api, JOB)
        _, listing = await api.get("/api/runs")
        runs.unlink()  # the disk is mended: the next request runs
        again, accepted = await post(api, JOB)
        job = await until_finished(api, accepted["run_id"])
    assert code == 507, refused
    assert str(runs) in refused["detail"] and "cannot be written" in refused["detail"]
    assert isinstance(listing, dict) and listing["runs"] == []
    assert again == 202 and job["status"] == "done"


async def test_a_job_file_that_cannot_be_written_is_507_and_counts_nothing(
    settings: Settings, tmp_path: Path
) -> None:
    """The job was in the queue's jobs before its job.json was written: a failed write was a 500
    and left a 'queued' job that never ran, counted against capacity for good (a lasting 429).
    The filesystem refuses the write for real: the run's folder can be made, but the temporary
    file of its job.json is past PATH_MAX (ENAMETOOLONG), as a full disk (ENOSPC) would refuse the write."""
    gate = tmp_path / "gate"
    gate.touch()
    deep = long_state_dir(tmp_path)
    queue = RunQueue(deep, GateLauncher(gate), RunLimits(queue_size=0))
    async with serving(queue, settings.state_dir) as (api, _):
        code, refused = await post(api, JOB)
        second, _ = await post(api, JOB)
        _, listing = await api.get("/api/runs")
    assert code == second == 507, refused
    assert "cannot be written" in refused["detail"] and "too long" in refused["detail"]
    assert isinstance(listing, dict) and listing["runs"] == []
    assert listing["queued"] == listing["running"] == 0
    assert list((deep / "runs").iterdir()) == []  # the empty run folder is not left behind


def long_state_dir(tmp_path: Path) -> Path:
    """A state dir whose runs/<run_id> path is 4090 characters: a file in it is past 4095."""
    run_id_len = len("20250302T120000Z-abcdef")
    want = 4090 - len("/runs/") - run_id_len
    path = tmp_path
    while len(str(path)) < want:
        path = path / ("d" * min(200, want - len(str(path)) - 1))
    assert len(str(path)) == want
    path.mkdir(parents=True)
    return path


@pytest.mark.timeout(WAIT_SECS * 4)
async def test_a_job_whose_file_cannot_be_written_fails_and_the_workers_go_on(
    settings: Settings, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A queued job whose job.json cannot be rewritten when it starts: the save's OSError went
    into the worker's except, whose own save raised again and ended the runs loop; the job stayed
    'running' (counted against capacity) and no later job ran."""
    gate = tmp_path / "gate"
    queue = RunQueue(settings.state_dir, GateLauncher(gate), RunLimits(queue_size=2))
    async with serving(queue, settings.state_dir) as (api, workers):
        _, first = await post(api, JOB)
        _, second = await post(api, JOB)
        out_dir = settings.state_dir / "runs" / second["run_id"]
        (out_dir / JOB_FILE_NAME).unlink()
        (out_dir / JOB_FILE_NAME).mkdir()  # its job.json can no longer be replaced
        (out_dir / JOB_FILE_NAME / "notes").write_text("kept")
        gate.touch()
        done = await until_finished(api, first["run_id"])
        broken = await until_finished(api, second["run_id"])
        _, third = await post(api, JOB)
        later = await until_finished(api, third["run_id"])
        alive = not workers.done()
    assert done["status"] == "done"
    assert broken["status"] == "failed" and JOB_FILE_NAME in broken["reason"]
    assert later["status"] == "done" and alive
    assert (out_dir / JOB_FILE_NAME / "notes").read_text() == "kept"  # the API's answer says why
    assert not tracebacks(caplog)  # a full disk is the job's failure, said in one line


@pytest.mark.timeout(WAIT_SECS * 4)
async def test_a_queued_job_whose_folder_was_removed_fails_saying_so(
    settings: Settings, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A person removed a queued run's folder (there is no cancel): the save of its start raised
    into the worker's catch-all, which logged a traceback and failed the job naming a temporary
    file ('FileNotFoundError: ... .job.json.<random>.tmp')."""
    gate = tmp_path / "gate"
    queue = RunQueue(settings.state_dir, GateLauncher(gate), RunLimits(queue_size=2))
    async with serving(queue, settings.state_dir) as (api, _):
        _, first = await post(api, JOB)
        _, second = await post(api, JOB)
        out_dir = settings.state_dir / "runs" / second["run_id"]
        shutil.rmtree(out_dir)
        gate.touch()
        await until_finished(api, first["run_id"])
        removed = await until_finished(api, second["run_id"])
    assert removed["status"] == "failed"
    assert (
        removed["reason"]
        == f"{out_dir} was removed while the run was queued: the replay was not run"
    )
    assert not tracebacks(caplog) and not out_dir.exists()


def test_a_job_left_running_whose_file_cannot_be_rewritten_does_not_stop_the_start(
    settings: Settings, tmp_path: Path
) -> None:
    """A job an earlier process left 'running' is failed at load; its save raised out of the
    queue's constructor, so the API (and the daemon) could not start."""
    gate = tmp_path / "gate"
    queue = RunQueue(settings.state_dir, GateLauncher(gate), RunLimits())
    job = queue.submit(RunRequest.model_validate(JOB))
    out_dir = Path(job.out_dir)
    running = json.loads((out_dir / JOB_FILE_NAME).read_text()) | {"status": "running"}
    (out_dir / JOB_FILE_NAME).write_text(json.dumps(running))
    with disk_full_after(0):
        reloaded = RunQueue(settings.state_dir, GateLauncher(gate), RunLimits()).get(job.run_id)
    assert reloaded is not None and reloaded.status == "failed"
