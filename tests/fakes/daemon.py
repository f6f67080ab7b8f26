"""Runs the real ``vigil run --sim`` as a subprocess for end-to-end tests.

``sim_daemon`` starts it with a clean environment (no stray ``VIGIL_*`` or API key from the caller's
shell) and its log in a file, and always reaps it: on an exception inside the block it is killed; a
test that wants the clean stop calls ``stop`` (SIGTERM) and checks the exit code itself.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import pytest

from core.errors import EXIT_REFUSE_TO_START

REPO = Path(__file__).resolve().parents[2]


def daemon_env(state_dir: Path, **settings: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VIGIL_")}
    env.pop("ANTHROPIC_API_KEY", None)
    env.update(
        VIGIL_STATE_DIR=str(state_dir),
        VIGIL_API__PORT="0",
        PYTHONUNBUFFERED="1",
        # the deadline is real time (8 s by default, under docker stop's 10 s): beside another
        # make test a daemon's loops and its niced API process took longer to stop than that,
        # and it exited 1 with 'api' reported stuck; a test's SIGTERM waits 30 s (``stop``)
        VIGIL_SUPERVISOR__SHUTDOWN_DEADLINE_SECS="25",
    )
    cache_home = os.environ.get("XDG_CACHE_HOME")
    if cache_home:  # the run's fit cache (tests/conftest.py): daemons keep none by default
        env["VIGIL_REGIME__FIT_CACHE_DIR"] = str(Path(cache_home) / "vigil" / "regime-fits")
    env.update(settings)  # a test's own settings win
    return env


#: a simulated market a loaded host keeps up with (``daemon_env(state, **LIGHT_MARKET)``): one
#: kline update a simulated minute instead of Binance's 250 ms, the silence timeout ten of them.
#: At 600x the 250 ms updates were 2,400 frames a real second a stream, more than a busy host gave
#: the daemon, which fell behind its clock: no fresh price for simulated hours (its exits refused),
#: its listener timing out in the handshake to its own in-process simulator
LIGHT_MARKET = {
    "VIGIL_SIM__UPDATE_INTERVAL_MS": "60000",
    "VIGIL_MARKET__SILENCE_TIMEOUT_SECS": "600",
}


#: how long a start that must be refused may take before it counts as hung
REFUSAL_WAIT_SECS = 100


def refused_sim_start(env: dict[str, str]) -> str:
    """``vigil run --sim`` in ``env``, which must refuse to start (exit 78) without a traceback:
    its stderr. A start that does not end (it hung on a FIFO) fails the test."""
    try:
        done = subprocess.run(
            [sys.executable, "-m", "runner.cli", "run", "--sim"],
            env=env,
            cwd=REPO,
            check=False,
            capture_output=True,
            text=True,
            timeout=REFUSAL_WAIT_SECS,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the start did not end: {exc.stderr!r}"[-2000:])
    assert done.returncode == EXIT_REFUSE_TO_START, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    return done.stderr


#: how long ``vigil sim`` may take to say it is up before the start counts as hung
SIM_UP_WAIT_SECS = 300


@contextmanager
def sim_exchange(env: dict[str, str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """``vigil sim`` in ``env`` (its ports chosen by the system), its output in ``log``, once it
    says it is up or has exited (the block checks ``poll()``); killed and reaped after the block.
    A start that says neither within ``SIM_UP_WAIT_SECS`` (a bound on a hang) fails the test."""
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "runner.cli", "sim", "--port", "0", "--rest-port", "0"],
            env=env,
            cwd=REPO,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + SIM_UP_WAIT_SECS
        while "sim exchange up" not in log.read_text() and proc.poll() is None:
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.1)
        yield proc
    finally:
        proc.kill()
        proc.wait()


@asynccontextmanager
async def sim_daemon(
    env: dict[str, str], log_path: Path, *args: str
) -> AsyncIterator[asyncio.subprocess.Process]:
    with log_path.open("ab") as log_file:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "runner.cli", "run", "--sim", *args,
            env=env, cwd=REPO, stderr=log_file,
        )  # fmt: skip
    try:
        yield proc
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


#: how long a test waits for a stopped daemon to exit: its own stop has deadlines of seconds
#: (``runner.supervisor``), so this only bounds a hang. It is generous because on a host loaded
#: several times over (another suite beside this one) an exit took over 30 s: joining the fit
#: pool's and the API's processes, flushing journals, all starved of CPU.
STOP_WAIT_SECS = 120.0


async def until_while_running(
    proc: asyncio.subprocess.Process, condition: Callable[[], bool], what: str
) -> None:
    """Poll ``condition`` (over files the daemon ``proc`` writes) until it holds, however long a
    loaded host takes: the test's timeout bounds a hang. A daemon that exits first fails the test
    naming ``what`` it never got to."""
    while not condition():
        if proc.returncode is not None:
            raise AssertionError(f"the daemon exited ({proc.returncode}) before {what}")
        await asyncio.sleep(0.2)  # polling files another process writes


async def stop(proc: asyncio.subprocess.Process, timeout_secs: float = STOP_WAIT_SECS) -> int:
    """SIGTERM and the exit code (the daemon stops its loops in order and saves state)."""
    proc.send_signal(signal.SIGTERM)
    return await asyncio.wait_for(proc.wait(), timeout=timeout_secs)
