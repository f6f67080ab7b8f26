"""The processes the ``api_load`` bench runs against: their environment, a ``vigil serve`` on a
copy of the daemon's state dir, waiting for an API to listen, and stopping a process.

Apart from ``bench.bench_api_load`` (the phases, the clients and the report) because this is the
child-process handling both the daemon under test and the control phase's server need.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def daemon_env(
    state_dir: Path,
    speed: float,
    isolation: str = "process",
    max_rps: float | None = None,
    api_cpus: tuple[int, ...] = (),
) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VIGIL_")}
    env.pop("ANTHROPIC_API_KEY", None)  # the fallback decides: no network, no cost
    empty = state_dir.parent / "vigil.toml"
    empty.write_text("# the defaults\n")
    env.update(
        VIGIL_CONFIG_FILE=str(empty),
        VIGIL_STATE_DIR=str(state_dir),
        VIGIL_API__PORT="0",
        VIGIL_SIM__SPEED=f"{speed:g}",
        VIGIL_SIM__PORT="0",
        VIGIL_API__ISOLATION=isolation,
    )
    if max_rps is not None:
        env["VIGIL_API__MAX_REQUESTS_PER_SEC"] = f"{max_rps:g}"
    if api_cpus:
        env["VIGIL_API__PROCESS_CPUS"] = json.dumps(list(api_cpus))
    return env


@contextlib.asynccontextmanager
async def serve_copy(state: Path, work: Path) -> AsyncIterator[tuple[str, str]]:
    """``vigil serve`` on a copy of the daemon's state dir (its URL and token)."""
    copy = work / "serve-state"
    shutil.copytree(state, copy, ignore=shutil.ignore_patterns("api.json", "*.db-wal", "*.db-shm"))
    env = daemon_env(copy, 1.0)
    with (work / "serve.log").open("wb") as log:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "runner.cli", "serve", "--port", "0",
            env=env, cwd=REPO, stdout=log, stderr=log,
        )  # fmt: skip
    try:
        yield await wait_for_api(copy, proc)
    finally:
        await terminate(proc)


async def terminate(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), 30)
        except TimeoutError:
            proc.kill()
            await proc.wait()


async def wait_for_api(state_dir: Path, proc: asyncio.subprocess.Process) -> tuple[str, str]:
    async with asyncio.timeout(300):
        while True:
            if proc.returncode is not None:
                raise RuntimeError(f"the daemon exited ({proc.returncode}) before its API")
            with contextlib.suppress(OSError, ValueError, KeyError):
                url = json.loads((state_dir / "api.json").read_text())["url"]
                return str(url), (state_dir / "api_token").read_text().strip()
            await asyncio.sleep(0.2)
