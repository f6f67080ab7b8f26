"""SIGTERM or SIGHUP while the daemon is still starting (warm-up, reconcile): it stops promptly, saves state and
never starts its loops."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import time
from pathlib import Path

import pytest
from fakes.daemon import (
    LIGHT_MARKET,
    REFUSAL_WAIT_SECS,
    REPO,
    STOP_WAIT_SECS,
    daemon_env,
    sim_daemon,
    stop,
    until_while_running,
)
from fakes.journal_lines import journal_text

from runner.warm_paths import WARM_UP_TIMEOUT_SECS

pytestmark = pytest.mark.e2e


#: the running daemons' market: what these tests check holds for any ticker, and beside other
#: work (load 13-16 on 2 cores) two daemons fitting three tickers' regimes cold took 175-199 s of
#: their 240 s timeouts; one ticker is one fit and three streams
ONE_LIGHT = {"VIGIL_MARKET__TICKERS": '["ETH/USDT"]', **LIGHT_MARKET}


async def _wait_for_text(path: Path, needle: str, proc: asyncio.subprocess.Process) -> None:
    """Until the daemon ``proc`` has logged ``needle``."""
    logged = lambda: needle in (path.read_text() if path.exists() else "")  # noqa: E731
    await until_while_running(proc, logged, repr(needle))


@pytest.mark.timeout(300)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
async def test_a_stop_signal_during_warm_up_stops_promptly_with_state_saved(
    tmp_path: Path, sig: signal.Signals
) -> None:
    """SIGTERM is ``docker stop``; SIGHUP the terminal closing, which killed it on the spot."""
    state_dir = tmp_path / "state"
    log_path = tmp_path / "daemon.log"
    env = daemon_env(state_dir, VIGIL_SIM__SPEED="300", VIGIL_SIM__START="2025-03-02T00:00:00Z")
    async with sim_daemon(env, log_path) as proc:
        # the learner is the last part built; warm-up (seconds against the simulator, minutes
        # against a slow exchange) follows
        await _wait_for_text(log_path, "learner: no model", proc)
        sent = time.monotonic()
        proc.send_signal(sig)
        code = await asyncio.wait_for(proc.wait(), timeout=STOP_WAIT_SECS)
        took_secs = time.monotonic() - sent
    log = log_path.read_text()
    assert code == 0, log
    assert f"stop requested during start-up ({sig.name})" in log, log
    assert "warm-up: crypto regimes" not in log  # warm-up was cut short...
    assert "market listener: connected" not in log  # ...and no loop started
    assert "shutdown: save runner state done" in log
    assert json.loads((state_dir / "runner_state.json").read_text())["schema_version"] >= 1
    assert "Traceback" not in log, log
    # not a speed bound (an idle host stops in about a second): well under the warm-up's own
    # timeout (runner.warm_paths), which a stop that waited for warm-up would have taken
    assert took_secs < WARM_UP_TIMEOUT_SECS / 2, f"stop took {took_secs:.1f} s"


def _journal_times(state_dir: Path) -> list[int]:
    lines = journal_text(state_dir / "logs" / "decisions.jsonl").splitlines()
    return [json.loads(line)["at_ms"] for line in lines]


@pytest.mark.timeout(240)
async def test_a_restart_on_the_same_state_dir_never_rewinds_simulated_time(
    tmp_path: Path,
) -> None:
    state_dir = tmp_path / "state"
    env = daemon_env(
        state_dir, VIGIL_SIM__SPEED="600", VIGIL_SIM__START="2025-03-02T00:00:00Z", **ONE_LIGHT
    )
    for run in (1, 2):
        log_path = tmp_path / f"daemon{run}.log"
        async with sim_daemon(env, log_path) as proc:
            await _wait_for_text(log_path, "market listener: connected", proc)
            await _wait_for_text(log_path, "agent.routine: decision ", proc)
            assert await stop(proc) == 0, log_path.read_text()
        if run == 1:
            first_run_times = _journal_times(state_dir)
    assert "resuming from" in (tmp_path / "daemon2.log").read_text()
    times = _journal_times(state_dir)
    assert len(times) > len(first_run_times)
    assert times == sorted(times), "journal time went backwards"


async def _vigil(env: dict[str, str], *args: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "runner.cli", *args,
        env=env, cwd=REPO, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, _ = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode()


@pytest.mark.timeout(240)
async def test_a_person_halts_and_resumes_a_running_daemon_and_health_says_so(
    tmp_path: Path,
) -> None:
    state_dir = tmp_path / "state"
    log_path = tmp_path / "daemon.log"
    env = daemon_env(
        state_dir,
        VIGIL_SIM__SPEED="300",
        VIGIL_SIM__START="2025-03-02T00:00:00Z",
        VIGIL_STATE__WATCH_INTERVAL_SECS="5",
        VIGIL_SUPERVISOR__HEARTBEAT_INTERVAL_SECS="5",
        **ONE_LIGHT,
    )
    async with sim_daemon(env, log_path) as proc:
        await _wait_for_text(log_path, "market listener: connected", proc)
        await _wait_for_text(log_path, "agent.routine: decision ", proc)
        assert (await _vigil(env, "trading", "halt", "--reason", "audit"))[0] == 0
        await _wait_for_text(log_path, "trading state changed by cli: HALTED", proc)
        await _wait_for_text(log_path, "trading=HALTED(audit)", proc)  # the status line
        code, out = await _vigil(env, "health")
        assert code == 1 and "unhealthy: trading: HALTED by cli: audit" in out, out
        assert (await _vigil(env, "trading", "resume"))[0] == 0
        await _wait_for_text(log_path, "trading state changed by cli: active", proc)
        # a second daemon on the same state dir (a second docker run on the volume) would place
        # every order twice: it is refused, and the running one goes on
        second = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "runner.cli", "run", "--sim",
            env=env, cwd=REPO, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        try:
            _, refusal = await asyncio.wait_for(second.communicate(), REFUSAL_WAIT_SECS)
        finally:
            if second.returncode is None:  # it ran beside the first: never left running
                second.kill()
                await second.wait()
        assert second.returncode == 78, refusal
        assert f"another vigil (daemon, pid {proc.pid} on " in refusal.decode(), refusal
        assert proc.returncode is None
        assert await stop(proc) == 0
    lines = journal_text(state_dir / "logs" / "decisions.jsonl").splitlines()
    changes = [json.loads(x) for x in lines if '"trading_state"' in x]
    assert [(c["mode"], c["by"]) for c in changes] == [("halted", "cli"), ("active", "cli")]
