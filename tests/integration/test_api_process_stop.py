"""Stopping the API process: closing its stdin stops one that serves; SIGTERM too, so one still
starting (a niced process importing FastAPI on a loaded machine takes seconds) ends at once
instead of finishing its start-up first and overrunning the daemon's shutdown deadline."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys

import pytest

from runner.api_process import _stop


async def test_a_process_still_starting_ends_on_sigterm_not_after_the_grace(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # what a starting API process is: no signal handler yet, not yet reading its stdin
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "import time; time.sleep(600)", stdin=asyncio.subprocess.PIPE
    )
    with caplog.at_level(logging.WARNING, logger="runner.api_process"):
        await _stop(proc)
    assert proc.returncode == -signal.SIGTERM  # not SIGKILL after STOP_GRACE_SECS
    assert "killed" not in caplog.text


async def test_a_process_that_stops_on_stdin_eof_exits_in_order() -> None:
    # what a serving API process does with either signal: stop its server and exit 0
    script = (
        "import signal, sys\n"
        "signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))\n"
        "print('serving', flush=True)\n"
        "sys.stdin.read()\n"
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", script, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
    )
    assert proc.stdout is not None
    assert await proc.stdout.readline() == b"serving\n"  # its handler is in place
    await _stop(proc)
    assert proc.returncode == 0


async def test_a_process_that_already_exited_is_left_alone() -> None:
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")
    await proc.wait()
    await _stop(proc)
    assert proc.returncode == 0
