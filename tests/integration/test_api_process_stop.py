"""Stopping the API process: closing its stdin stops one that serves; SIGTERM too, so one still
starting (a niced process importing FastAPI on a loaded machine takes seconds) ends at once
instead of finishing its start-up first and overrunning the daemon's shutdown deadline. And the
real API process, signalled while it serves with its stdin still open (Ctrl-C reaches the whole
process group), exits 0: it aborted with "Fatal Python error: _enter_buffered_busy" (exit -6),
its stdin watch blocked in a buffered read at interpreter exit."""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
import sys
from pathlib import Path

import pytest

from runner.api_process import EXIT_CANNOT_LISTEN, ApiProcessSpec, _stop
from runner.config import Settings


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


@pytest.mark.timeout(120)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
async def test_the_api_process_signalled_while_serving_exits_0(
    tmp_path: Path, sig: signal.Signals
) -> None:
    api = Settings(state_dir=tmp_path).api.model_copy(update={"port": 0})
    spec = ApiProcessSpec(
        state_dir=tmp_path,
        logs_dir=tmp_path / "logs",
        api=api,
        token="t" * 32,
        upstream_url="http://127.0.0.1:9",  # never asked: nothing calls the API here
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "runner.api_process",
        stdin=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stderr is not None
    try:
        proc.stdin.write(spec.model_dump_json().encode() + b"\n")
        await proc.stdin.drain()
        seen = b""
        while b"API on" not in seen:  # serving, its signal handlers and stdin watch in place
            line = await proc.stderr.readline()
            assert line, seen.decode(errors="replace")
            seen += line
        proc.send_signal(sig)  # stdin stays open
        rest = await proc.stderr.read()
        assert await proc.wait() == 0, rest.decode(errors="replace")[-2000:]
        assert b"Fatal Python error" not in rest
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


@pytest.mark.timeout(120)
async def test_the_api_process_on_a_taken_port_says_so_in_one_line_and_exits_78(
    tmp_path: Path,
) -> None:
    """A taken port was a traceback in api.log at every try after the backoff."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        api = Settings(state_dir=tmp_path).api.model_copy(update={"port": port})
        spec = ApiProcessSpec(
            state_dir=tmp_path,
            logs_dir=tmp_path / "logs",
            api=api,
            token="t" * 32,
            upstream_url="http://127.0.0.1:9",
        )
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "runner.api_process",
            stdin=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        assert proc.stdin is not None and proc.stderr is not None
        proc.stdin.write(spec.model_dump_json().encode() + b"\n")
        await proc.stdin.drain()
        said = (await proc.stderr.read()).decode(errors="replace")
        assert await proc.wait() == EXIT_CANNOT_LISTEN, said[-2000:]
    assert f"the API cannot listen on 127.0.0.1:{port}" in said
    assert "Traceback" not in said
