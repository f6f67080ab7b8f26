"""A symlink or FIFO at ``logs/api.log``: the API process refused it with a traceback and exit 1,
and the daemon's ``api`` loop started another after its backoff, refused the same way, for as
long as the daemon ran. The API process now says it in one line (exit 73), and the daemon says
once in vigil.log that the API is off until it starts again, and trades on."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from pathlib import Path

import pytest
from fastapi import FastAPI

from api.server import ApiServer
from core.backoff import Backoff
from core.bus import EventBus
from core.clock import WallClock
from runner.api_process import EXIT_LOG_REFUSED, ApiProcessSpec, run_api_process
from runner.config import Settings
from runner.supervisor import LoopSpec, LoopState, Supervisor

_OTHER = b"someone else's file\n"


def _spec(state_dir: Path) -> ApiProcessSpec:
    return ApiProcessSpec(
        state_dir=state_dir,
        logs_dir=state_dir / "logs",
        api=Settings(state_dir=state_dir).api.model_copy(update={"port": 0}),
        token="t" * 32,
        upstream_url="http://127.0.0.1:9",  # never asked: the process ends before it serves
    )


def _symlinked_api_log(tmp_path: Path) -> Path:
    other = tmp_path / "other.txt"
    other.write_bytes(_OTHER)
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "api.log").symlink_to(other)
    return other


@pytest.mark.timeout(120)
async def test_the_api_process_refuses_its_log_file_in_one_line(tmp_path: Path) -> None:
    other = _symlinked_api_log(tmp_path)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "runner.api_process",
        stdin=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stderr is not None
    proc.stdin.write(_spec(tmp_path).model_dump_json().encode() + b"\n")
    await proc.stdin.drain()
    said = (await proc.stderr.read()).decode(errors="replace")
    assert await proc.wait() == EXIT_LOG_REFUSED, said[-2000:]
    assert said.count("\n") == 1 and "Traceback" not in said, said[-2000:]
    assert f"{tmp_path / 'logs' / 'api.log'} is a symlink" in said
    assert other.read_bytes() == _OTHER


@pytest.mark.timeout(120)
@pytest.mark.parametrize("planted", ["symlink", "fifo"])
async def test_the_daemon_turns_the_api_off_once_instead_of_starting_it_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, planted: str
) -> None:
    if planted == "symlink":
        _symlinked_api_log(tmp_path)
    else:
        (tmp_path / "logs").mkdir()
        os.mkfifo(tmp_path / "logs" / "api.log")
    upstream = ApiServer(FastAPI(), "127.0.0.1", 0)
    supervisor = Supervisor(
        WallClock(),
        EventBus(),
        [LoopSpec("api", lambda: run_api_process(upstream, _spec(tmp_path)), stop_early=True)],
        policy=Backoff(base_secs=0.0, cap_secs=0.0),  # a loop that raised starts again at once
    )
    running = asyncio.create_task(supervisor.run())
    status = supervisor.status["api"]
    with caplog.at_level(logging.ERROR, logger="runner.api_process"):
        while "the API is off" not in caplog.text and status.restarts == 0:
            await asyncio.sleep(0.05)  # another process's exit: nothing to await on
        supervisor.request_stop("test")
        report = await running
    assert status.restarts == 0, status.last_error
    assert caplog.text.count("the API is off until vigil starts again") == 1
    assert "the API's log file" in caplog.text and "Traceback" not in caplog.text
    assert report.stuck == [] and status.state is LoopState.STOPPED
