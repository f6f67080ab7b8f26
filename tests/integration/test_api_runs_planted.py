"""A run's folder holds what was planted there between the job's submission and its run (a symlink,
dangling or not, or a FIFO at ``job.tmp`` or ``replay.log``): the job's files were opened by those
fixed names, so a link was written through (the file it named overwritten with the job's JSON or
the replay's output, the link renamed in as ``job.json``) and a FIFO held the API's event loop
until someone read it. The job's status now goes to a fresh temporary name (O_EXCL) renamed into
place, and the log is created afresh, never through what is there; and anything the API did not put in
the folder fails the job before its replay runs (a ``logs`` link sent the replay's journals to the
folder it named). Real uvicorn on loopback, real children."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest
from fakes.api_support import default_settings
from fakes.fifo import released_fifo
from test_api_runs import post, serving, until_finished

from api.runs import JOB_FILE_NAME, LOG_FILE_NAME, RunLimits, RunQueue
from api.runs_models import RunRequest
from runner.config import Settings
from runner.runs_launcher import ReplayLauncher

JOB = {"from": "2025-03-02", "to": "2025-03-02"}
_VICTIM = b'{"cash": 10000}\n'


@pytest.fixture
def settings(tmp_path: Path) -> Iterator[Settings]:
    with default_settings(tmp_path) as defaults:
        yield defaults


class GateLauncher:
    """A child that says a word, waits until ``gate`` exists, then exits 0."""

    def __init__(self, gate: Path) -> None:
        self.gate = gate

    def argv(self, request: RunRequest, out_dir: Path) -> Sequence[str]:
        code = (
            "import pathlib, sys, time\nprint('replayed', flush=True)\n"
            "while not pathlib.Path(sys.argv[1]).exists(): time.sleep(0.02)"
        )
        return [sys.executable, "-c", code, str(self.gate)]


def _link_to_victim(victim: Path) -> Callable[[Path], None]:
    def plant(path: Path) -> None:
        path.symlink_to(victim)

    return plant


def _dangling(victim: Path) -> Callable[[Path], None]:
    def plant(path: Path) -> None:
        victim.unlink()
        path.symlink_to(victim)

    return plant


@pytest.mark.timeout(240)
@pytest.mark.parametrize("name", ["job.tmp", LOG_FILE_NAME])
@pytest.mark.parametrize("planting", [_link_to_victim, _dangling])
async def test_a_symlink_planted_in_a_queued_runs_folder_is_never_written_through(
    settings: Settings,
    tmp_path: Path,
    name: str,
    planting: Callable[[Path], Callable[[Path], None]],
) -> None:
    victim = tmp_path / "runner_state.json"
    victim.write_bytes(_VICTIM)
    gate = tmp_path / "gate"
    queue = RunQueue(settings.state_dir, GateLauncher(gate), RunLimits(queue_size=2))
    async with serving(queue, settings.state_dir) as api:
        _, first = await post(api, JOB)
        _, second = await post(api, JOB)
        out_dir = settings.state_dir / "runs" / second["run_id"]
        planting(victim)(out_dir / name)
        gate.touch()
        await until_finished(api, first["run_id"])
        job = await until_finished(api, second["run_id"])
    linked_to = victim.read_bytes() if victim.exists() else None
    assert linked_to in (_VICTIM, None), linked_to
    assert not (out_dir / JOB_FILE_NAME).is_symlink()
    # the job itself is refused: the API did not put it there
    assert job["status"] == "failed" and name in job["reason"], job


@pytest.mark.timeout(240)
@pytest.mark.parametrize("name", ["job.tmp", LOG_FILE_NAME])
async def test_a_fifo_planted_in_a_queued_runs_folder_does_not_hold_the_api(
    settings: Settings, tmp_path: Path, name: str
) -> None:
    gate = tmp_path / "gate"
    queue = RunQueue(settings.state_dir, GateLauncher(gate), RunLimits(queue_size=2))
    async with serving(queue, settings.state_dir) as api:
        _, first = await post(api, JOB)
        _, second = await post(api, JOB)
        fifo = settings.state_dir / "runs" / second["run_id"] / name
        os.mkfifo(fifo)
        with released_fifo(fifo, os.O_RDONLY) as released:
            gate.touch()
            await until_finished(api, first["run_id"])
            job = await until_finished(api, second["run_id"])
    assert not released(), "the API waited on the FIFO for a reader"
    assert job["status"] in ("done", "failed"), job


class FirstWaitsLauncher:
    """The first job waits for ``gate`` (so the next is queued meanwhile); later ones replay."""

    def __init__(self, gate: Path, settings: Settings) -> None:
        self._gate = GateLauncher(gate)
        self._replay = ReplayLauncher(settings)
        self._calls = 0

    def argv(self, request: RunRequest, out_dir: Path) -> Sequence[str]:
        self._calls += 1
        launcher = self._gate if self._calls == 1 else self._replay
        return launcher.argv(request, out_dir)


@pytest.mark.timeout(300)
async def test_a_logs_link_planted_in_a_queued_runs_folder_fails_the_job_before_the_replay(
    settings: Settings, tmp_path: Path
) -> None:
    """A ``logs`` link in the run's folder was followed by the replay: its journals went to the
    folder it named, and the job was done. The API made that folder for the job alone, so what
    else stands there fails the job naming it, and no replay runs."""
    gate = tmp_path / "gate"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    queue = RunQueue(
        settings.state_dir, FirstWaitsLauncher(gate, settings), RunLimits(queue_size=2)
    )
    async with serving(queue, settings.state_dir) as api:
        _, first = await post(api, JOB)
        _, second = await post(api, JOB)
        out_dir = settings.state_dir / "runs" / second["run_id"]
        (out_dir / "logs").symlink_to(elsewhere, target_is_directory=True)
        gate.touch()
        await until_finished(api, first["run_id"])
        job = await until_finished(api, second["run_id"])
    assert list(elsewhere.iterdir()) == []
    assert job["status"] == "failed" and "logs" in job["reason"], job
    assert (out_dir / "logs").is_symlink()
