"""``/api/runs`` on loopback (real uvicorn, aiohttp client): a replay submitted through the API runs
in a child process (``vigil replay``) and its job reports the report's summary; bad input is a 422
with the reason, a full queue a 429; a job whose child crashes, or whose API stops, is ``failed``
with why. The queue tests other than the real replay use real child processes that sleep or exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from fakes.api_support import Served, default_settings, serve_api
from fakes.fifo import outcome_beside_fifo

from api.runs import INTERRUPTED, JOB_FILE_NAME, RunLimits, RunQueue
from api.runs_models import RunRequest
from api.runs_routes import run_routes
from runner.config import Settings
from runner.runs_launcher import ReplayLauncher, build_run_queue

DAY = "2025-03-02"
WAIT_SECS = 240.0  # a generous bound on a loaded machine; the waits end on the condition


@pytest.fixture
def settings(tmp_path: Path) -> Iterator[Settings]:
    with default_settings(tmp_path) as defaults:
        yield defaults


class ScriptLauncher:
    """A child that runs ``code`` (sleeps, or exits with a message) instead of a replay."""

    def __init__(self, code: str) -> None:
        self.code = code

    def argv(self, request: RunRequest, out_dir: Path) -> Sequence[str]:
        return [sys.executable, "-c", self.code]


@contextlib.asynccontextmanager
async def serving(queue: RunQueue, state_dir: Path) -> AsyncIterator[Served]:
    workers = asyncio.create_task(queue.run())
    try:
        async with serve_api(state_dir, extensions=[run_routes(queue)]) as api:
            yield api
    finally:
        workers.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await workers


async def post(api: Served, body: dict[str, Any]) -> tuple[int, Any]:
    async with api.session.post(api.url + "/api/runs", json=body, headers=api.auth) as r:
        return r.status, await r.json()


async def until_finished(api: Served, run_id: str) -> dict[str, Any]:
    async with asyncio.timeout(WAIT_SECS):
        while True:
            code, body = await api.get(f"/api/runs/{run_id}")
            assert code == 200 and isinstance(body, dict)
            if body["status"] in ("done", "failed"):
                return body
            await asyncio.sleep(0.2)


@pytest.mark.timeout(WAIT_SECS + 60)
async def test_a_submitted_replay_runs_in_a_child_and_reports_its_summary(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Started, as a person would, from the folder holding the state dir as ``state/`` (its
    ``outbox/`` beside): the child once imported that folder as vigil's own ``state`` package."""
    (settings.state_dir / "outbox").mkdir(exist_ok=True)
    monkeypatch.chdir(settings.state_dir.parent)
    queue = build_run_queue(settings)
    async with serving(queue, settings.state_dir) as api:
        request = {"tickers": ["BTC/USDT"], "from": DAY, "to": DAY, "seed": 7}
        code, accepted = await post(api, request)
        assert code == 202, accepted
        assert accepted["status"] == "queued" and set(accepted) == {"run_id", "status"}
        job = await until_finished(api, accepted["run_id"])
        _, listing = await api.get("/api/runs")
    assert job["status"] == "done", job
    assert job["exit_code"] == 0 and job["reason"] is None
    assert job["request"]["from"] == DAY and job["request"]["seed"] == 7
    summary = job["summary"]
    assert summary["finished"] is True
    assert summary["decisions"] > 0 and summary["deciders"] == {"fallback": summary["decisions"]}
    assert summary["start_equity_usd"] == 10_000.0
    assert summary["total_return_pct"] is not None
    assert summary["buy_and_hold_return_pct"]["BTC/USDT"] is not None
    assert "sharpe" in summary["unavailable"]  # one day: no Sharpe, and it says why
    out_dir = settings.state_dir / "runs" / accepted["run_id"]
    assert Path(job["out_dir"]) == out_dir
    for name in ("report.html", "report.json", "replay.json", "logs/decisions.jsonl", "replay.log"):
        assert (out_dir / name).is_file(), name
    replay = json.loads((out_dir / "replay.json").read_text())
    assert replay["seed"] == 7 and replay["tickers"] == ["BTC/USDT"]
    assert isinstance(listing, dict) and [r["run_id"] for r in listing["runs"]] == [job["run_id"]]


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({"from": "2025-03-05", "to": "2025-03-01"}, "is before 'from'"),
        ({"from": "2025-03-01"}, "Field required"),
        ({"from": "March", "to": "2025-03-01"}, "valid date"),
        ({"from": DAY, "to": DAY, "tickers": ["DOGE/USDT"]}, "DOGE/USDT: not configured"),
        # the reason quotes the ticker: half a surrogate pair failed its UTF-8 answer, a 500
        ({"from": DAY, "to": DAY, "tickers": ["BTC\ud800"]}, "not configured"),
        ({"from": DAY, "to": DAY, "tickers": []}, "at least 1 item"),
        ({"from": DAY, "to": DAY, "tickers": ["BTC/USDT", "BTC/USDT"]}, "names one twice"),
        ({"from": DAY, "to": DAY, "decider": "oracle"}, "'fallback', 'claude' or 'debate'"),
        ({"from": DAY, "to": DAY, "decider": "claude"}, "needs ANTHROPIC_API_KEY"),
        ({"from": DAY, "to": DAY, "seed": -1}, "greater than or equal to 0"),
        ({"from": DAY, "to": DAY, "speed": 5}, "Extra inputs are not permitted"),
        ({"from": "2024-01-01", "to": "2025-06-01"}, "at most 366"),
        # days no recording holds were queued, and failed later with the replay's message
        ({"from": "0001-01-01", "to": "0001-01-02"}, "greater than or equal to 2010-01-01"),
        ({"from": "2099-12-31", "to": "2100-01-01"}, "less than or equal to 2099-12-31"),
    ],
)
async def test_bad_requests_are_422_with_the_reason(
    settings: Settings, body: dict[str, Any], reason: str
) -> None:
    queue = build_run_queue(settings)
    async with serving(queue, settings.state_dir) as api:
        code, answer = await post(api, body)
        _, listing = await api.get("/api/runs")
    assert code == 422, answer
    assert reason in json.dumps(answer["detail"])
    assert isinstance(listing, dict) and listing["runs"] == []  # nothing queued, no folder
    assert not (settings.state_dir / "runs").exists()


async def test_a_full_queue_is_429_and_unknown_ids_404(settings: Settings) -> None:
    queue = RunQueue(
        settings.state_dir,
        ScriptLauncher("import time; time.sleep(60)"),
        RunLimits(queue_size=1, concurrency=1),
    )
    async with serving(queue, settings.state_dir) as api:
        first = await post(api, {"from": DAY, "to": DAY})
        second = await post(api, {"from": DAY, "to": DAY})
        code, refused = await post(api, {"from": DAY, "to": DAY})
        missing, _ = await api.get("/api/runs/nosuchrun")
        bad_id, _ = await api.get("/api/runs/..%2F..%2Fetc")
        async with api.session.get(api.url + "/api/runs") as r:
            unauthorised = r.status
        _, listing = await api.get("/api/runs")
    assert first[0] == second[0] == 202
    assert code == 429 and "at most 2" in refused["detail"]
    assert missing == 404 and bad_id in (404, 422) and unauthorised == 401
    assert isinstance(listing, dict) and listing["capacity"] == 2
    assert listing["queued"] + listing["running"] == 2


async def test_a_crashed_child_fails_its_job_with_its_last_words(settings: Settings) -> None:
    code = "import sys; print('loading'); sys.exit('vigil: refusing to start: no data for 2019')"
    queue = RunQueue(settings.state_dir, ScriptLauncher(code), RunLimits())
    async with serving(queue, settings.state_dir) as api:
        _, accepted = await post(api, {"from": DAY, "to": DAY})
        job = await until_finished(api, accepted["run_id"])
    assert job["status"] == "failed" and job["exit_code"] == 1
    assert job["reason"] == (
        "stopped early or a loop failed: loading | vigil: refusing to start: no data for 2019"
    )
    assert job["summary"] is None and "no report.json" in job["unavailable"]["summary"]


async def test_stopping_the_api_terminates_the_child_and_fails_the_job(
    settings: Settings,
) -> None:
    pid_file = settings.state_dir / "child.pid"
    code = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    queue = RunQueue(settings.state_dir, ScriptLauncher(code), RunLimits())
    async with serving(queue, settings.state_dir) as api:
        _, accepted = await post(api, {"from": DAY, "to": DAY})
        async with asyncio.timeout(WAIT_SECS):
            while not pid_file.exists() or not pid_file.read_text():
                await asyncio.sleep(0.05)
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # reaped: not a zombie, not running
    job = queue.get(accepted["run_id"])
    assert job is not None and job.status == "failed" and job.reason == INTERRUPTED
    # a later API process lists it as it was left
    again = RunQueue(settings.state_dir, ReplayLauncher(settings), RunLimits())
    reloaded = again.get(accepted["run_id"])
    assert reloaded is not None and reloaded.status == "failed" and reloaded.reason == INTERRUPTED


def test_a_job_left_running_by_a_dead_process_is_listed_failed(settings: Settings) -> None:
    queue = RunQueue(settings.state_dir, ReplayLauncher(settings), RunLimits())
    job = queue.submit(RunRequest.model_validate({"from": DAY, "to": DAY}))
    job_file = Path(job.out_dir) / JOB_FILE_NAME
    running = json.loads(job_file.read_text()) | {"status": "running", "started_at_ms": 1}
    job_file.write_text(json.dumps(running))
    reloaded = RunQueue(settings.state_dir, ReplayLauncher(settings), RunLimits()).get(job.run_id)
    assert reloaded is not None and reloaded.status == "failed"
    assert reloaded.reason == INTERRUPTED and reloaded.started_at_ms == 1
    assert json.loads(job_file.read_text())["status"] == "failed"


class ReportLauncher:
    """A child that writes ``report`` as its run's report.json and exits 0."""

    def __init__(self, report: str) -> None:
        self.report = report

    def argv(self, request: RunRequest, out_dir: Path) -> Sequence[str]:
        code = (
            "import pathlib, sys; pathlib.Path(sys.argv[1], 'report.json').write_text(sys.argv[2])"
        )
        return [sys.executable, "-c", code, str(out_dir), self.report]


@pytest.mark.parametrize(
    "report",
    [
        '{"metrics": {}, "deciders": [{"decided_by": "fallback", "decisions": "x"}]}',
        '{"metrics": {}, "deciders": [{"decided_by": "fallback", "decisions": 1e400}]}',
        '{"metrics": [], "deciders": []}',
        '{"metrics": {}, "deciders": [], "buy_and_hold_figures": [1]}',
        '{"metrics": {}, "deciders": [], "buy_and_hold_figures": {"BTC/USDT": 5}}',
        '{"metrics": {"sharpe": NaN}, "deciders": []}',
    ],
)
async def test_a_report_not_of_the_reports_shape_leaves_the_summary_unavailable(
    settings: Settings, report: str
) -> None:
    """The summary's reader caught KeyError and TypeError only: int('x') and a list's .items()
    escaped _finish, then the worker's own _finish, ending the runs loop with the job left
    'running'; a job left running with such a report stopped the next API process's start.
    A NaN figure was kept as a number (null in job.json, with no reason)."""
    queue = RunQueue(settings.state_dir, ReportLauncher(report), RunLimits())
    async with serving(queue, settings.state_dir) as api:
        _, accepted = await post(api, {"from": DAY, "to": DAY})
        job = await until_finished(api, accepted["run_id"])
    assert job["status"] == "done" and job["summary"] is None
    assert "not a report vigil wrote" in job["unavailable"]["summary"]
    job_file = Path(job["out_dir"]) / JOB_FILE_NAME
    job_file.write_text(json.dumps(job | {"status": "running", "finished_at_ms": None}))
    reloaded = RunQueue(settings.state_dir, ReplayLauncher(settings), RunLimits())
    again = reloaded.get(accepted["run_id"])
    assert again is not None and again.status == "failed" and again.reason == INTERRUPTED
    assert "not a report vigil wrote" in again.unavailable["summary"]


def test_a_job_is_read_from_its_own_folder_whatever_its_job_json_says(
    settings: Settings, tmp_path: Path
) -> None:
    """job.json's out_dir and run_id were trusted: a state dir mounted at another path (a Docker
    volume) or an edited out_dir made the start's fail-marking write, and the summary's read, go
    to another folder; a copied folder replaced the job whose run_id it repeated. A job is its
    folder: out_dir is where its job.json was found, and a run_id not the folder's is skipped."""
    queue = RunQueue(settings.state_dir, ReplayLauncher(settings), RunLimits())
    job = queue.submit(RunRequest.model_validate({"from": DAY, "to": DAY}))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    job_file = Path(job.out_dir) / JOB_FILE_NAME
    job_file.write_text(json.dumps(json.loads(job_file.read_text()) | {"out_dir": str(elsewhere)}))
    copy = Path(job.out_dir).with_name("20990101T000000Z-copied")
    copy.mkdir()
    (copy / JOB_FILE_NAME).write_text(job_file.read_text())

    moved = tmp_path / "moved-state"
    settings.state_dir.rename(moved)
    reloaded = RunQueue(moved, ReplayLauncher(settings), RunLimits())

    found = reloaded.get(job.run_id)
    folder = moved / "runs" / job.run_id
    assert found is not None and found.status == "failed" and found.out_dir == str(folder)
    assert json.loads((folder / JOB_FILE_NAME).read_text())["out_dir"] == str(folder)
    assert list(elsewhere.iterdir()) == []
    assert [j.run_id for j in reloaded.listing().runs] == [job.run_id]


@pytest.mark.parametrize("which", [JOB_FILE_NAME, "report.json", "replay.json"])
def test_a_fifo_in_a_run_folder_does_not_block_the_start(settings: Settings, which: str) -> None:
    """job.json (every run's, read at the start) and the report and replay files (read for the
    summary of a job left running, then of every job as it ends, on the event loop) were read
    with a plain open, which waits on a FIFO for a writer: the API never started, or froze. A
    job.json that is no file is skipped; a report that is none leaves the summary unavailable."""
    queue = RunQueue(settings.state_dir, ReplayLauncher(settings), RunLimits())
    job = queue.submit(RunRequest.model_validate({"from": DAY, "to": DAY}))
    folder = Path(job.out_dir)
    job_file = folder / JOB_FILE_NAME
    job_file.write_text(json.dumps(json.loads(job_file.read_text()) | {"status": "running"}))
    if which != JOB_FILE_NAME:
        (folder / "report.json").write_text('{"metrics": {}, "deciders": []}')
    (folder / which).unlink(missing_ok=True)
    os.mkfifo(folder / which)

    def start() -> RunQueue:
        return RunQueue(settings.state_dir, ReplayLauncher(settings), RunLimits())

    reloaded = outcome_beside_fifo(start, folder / which)
    assert isinstance(reloaded, RunQueue), reloaded
    found = reloaded.get(job.run_id)
    if which == JOB_FILE_NAME:
        assert found is None
        return
    assert found is not None and found.status == "failed" and found.reason == INTERRUPTED
    if which == "report.json":
        assert found.summary is None and "not a regular file" in found.unavailable["summary"]
    else:
        assert found.summary is not None and "replay.json" in found.summary.unavailable["finished"]
