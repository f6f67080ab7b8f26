"""The real ``vigil`` process against its built-in simulator: start, health, a person's live edit,
SIGTERM with an ordered stop; and the refusals a person meets on bad config or state."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path

import pytest
from fakes.daemon import LIGHT_MARKET, STOP_WAIT_SECS, daemon_env

pytestmark = pytest.mark.e2e

VIGIL = [sys.executable, "-m", "runner.cli"]
REPO = Path(__file__).resolve().parents[2]


def _env(state_dir: Path, **extra: str) -> dict[str, str]:
    """A clean environment (no VIGIL_* of the caller, no key) whose daemon's API takes a free port:
    another daemon of this suite, or of a suite running beside it, may hold the default one."""
    return daemon_env(state_dir, **extra)


class _Daemon:
    """A running ``vigil run --sim`` whose log lines are collected as they arrive."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.lines: list[str] = []
        self._changed = asyncio.Event()
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.proc.stderr is not None
        async for raw in self.proc.stderr:
            self.lines.append(raw.decode(errors="replace").rstrip())
            self._changed.set()

    async def wait_for_line(self, needle: str) -> str:
        while True:
            for line in self.lines:
                if needle in line:
                    return line
            if self._reader.done():
                raise AssertionError(f"daemon exited before logging {needle!r}:\n" + self.log())
            self._changed.clear()
            await self._changed.wait()

    def log(self) -> str:
        return "\n".join(self.lines)


async def _vigil(*args: str, env: dict[str, str]) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        *VIGIL,
        *args,
        env=env,
        cwd=REPO,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


@pytest.mark.timeout(300)
async def test_daemon_runs_against_the_sim_merges_a_live_edit_and_stops_cleanly(
    tmp_path: Path,
) -> None:
    state_dir = tmp_path / "state"
    env = _env(
        state_dir,
        VIGIL_SIM__START="2025-03-01T00:40:00Z",
        VIGIL_SIM__SPEED="300",
        VIGIL_STATE__WATCH_INTERVAL_SECS="5",
        **LIGHT_MARKET,
    )
    proc = await asyncio.create_subprocess_exec(
        *VIGIL, "run", "--sim", env=env, cwd=REPO, stderr=asyncio.subprocess.PIPE
    )
    daemon = _Daemon(proc)
    try:
        await daemon.wait_for_line("market listener: connected")
        await daemon.wait_for_line("BTC/USDT 1h closed")

        code, out, _ = await _vigil("health", env=env)
        assert code == 0, out
        assert out.startswith("healthy")

        state_path = state_dir / "runner_state.json"
        await daemon.wait_for_line("status ")
        if not state_path.exists():  # the store writes on first save; make one to edit
            state_path.write_text(json.dumps({"schema_version": 1}))
        edited = json.loads(state_path.read_text())
        edited["notes"] = "watch SOL funding this week"
        state_path.write_text(json.dumps(edited))  # an editor writing in place
        await daemon.wait_for_line("notes")

        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), timeout=STOP_WAIT_SECS) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    await daemon.wait_for_line("stopped (SIGTERM)")
    log = daemon.log()
    stop_order = [line.split("shutdown: ")[1] for line in daemon.lines if "shutdown: " in line]
    assert stop_order[:3] == [
        "flush decisions journal done",
        "flush trades journal done",
        "save runner state done",
    ], log
    saved = json.loads((state_dir / "runner_state.json").read_text())
    assert saved["notes"] == "watch SOL funding this week"
    assert (state_dir / "logs" / "decisions.jsonl").exists()
    assert (state_dir / "logs" / "trades.csv").read_text().startswith("at_ms,")
    assert "Traceback" not in log, log

    code, out, _ = await _vigil("health", "--stale-secs", "0", env=env)
    assert code == 1 and out.startswith("unhealthy")


async def test_bad_config_refuses_to_start_naming_field_and_value(tmp_path: Path) -> None:
    code, _, err = await _vigil("run", "--sim", env=_env(tmp_path, VIGIL_SIM__SPEED="fast"))
    assert code == 78
    assert "sim.speed" in err and "'fast'" in err

    (tmp_path / "vigil.toml").write_text('[market]\nsourse = "sim"\n')
    code, _, err = await _vigil("--config", str(tmp_path / "vigil.toml"), "run", env=_env(tmp_path))
    assert code == 78 and "market.sourse" in err and "unknown setting" in err


async def test_unusable_state_dir_refuses_to_start(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the state dir should be")
    code, _, err = await _vigil("run", "--sim", env=_env(blocker / "state"))
    assert code == 78
    assert "state dir" in err and str(blocker / "state") in err
    assert blocker.read_text() == "a file where the state dir should be"


async def test_broken_state_file_refuses_to_start_and_is_left_untouched(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    broken = '{"schema_version": 1, "notes": "half an edit'
    (state_dir / "runner_state.json").write_text(broken)
    code, _, err = await _vigil("run", "--sim", env=_env(state_dir))
    assert code == 78 and "runner_state.json" in err
    assert (state_dir / "runner_state.json").read_text() == broken


async def test_config_show_redacts_secrets(tmp_path: Path) -> None:
    env = _env(tmp_path, ANTHROPIC_API_KEY="sk-ant-very-secret", VIGIL_SIM__SPEED="120")
    code, out, err = await _vigil("config", "show", env=env)
    assert code == 0, err
    shown = json.loads(out)
    assert shown["anthropic_api_key"] == "**********"
    assert shown["sim"]["speed"] == 120.0
    assert "sk-ant-very-secret" not in out + err
