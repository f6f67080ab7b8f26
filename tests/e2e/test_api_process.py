"""``[api] isolation = "process"`` (the default) on a real ``vigil run --sim``: the API answers from
a process of its own, a crashed API process is started again by the daemon's supervisor, and a
daemon killed outright leaves no API process behind."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path

import aiohttp
import pytest
from fakes.api_client import wait_for_api
from fakes.daemon import LIGHT_MARKET, daemon_env, sim_daemon

pytestmark = pytest.mark.e2e


def api_pid(state: Path) -> int:
    return int(json.loads((state / "api.json").read_text())["pid"])


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def wait_until(condition: object, what: str, timeout_secs: float = 120.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_secs
    while not condition():  # type: ignore[operator]
        if loop.time() > deadline:
            raise AssertionError(f"not within {timeout_secs} s: {what}")
        await asyncio.sleep(0.2)  # another process's state: nothing to await on


async def status(url: str, token: str) -> dict[str, object]:
    async with (
        aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"}) as http,
        http.get(url + "/api/status") as r,
    ):
        assert r.status == 200, await r.text()
        body: dict[str, object] = await r.json()
        return body


async def api_restarts(url: str, token: str) -> int:
    loops = {loop["name"]: loop for loop in (await status(url, token))["loops"]}  # type: ignore[attr-defined]
    return int(loops["api"]["restarts"])


def pid_changed(state: Path, old: int) -> bool:
    try:
        return api_pid(state) != old
    except (OSError, ValueError, KeyError):
        return False


@pytest.mark.timeout(240)
async def test_the_api_process_is_separate_restarted_and_never_orphaned(tmp_path: Path) -> None:
    state = tmp_path / "state"
    cpu = min(os.sched_getaffinity(0))
    env = daemon_env(
        state, VIGIL_SIM__SPEED="600", VIGIL_API__PROCESS_CPUS=f"[{cpu}]", **LIGHT_MARKET
    )
    async with sim_daemon(env, tmp_path / "daemon.log") as proc:
        url, token = await wait_for_api(state, proc)
        first = api_pid(state)
        assert first != proc.pid  # the API is not on the daemon's loop
        assert os.sched_getaffinity(first) == {cpu}  # [api] process_cpus: the API's core only
        assert os.sched_getaffinity(proc.pid) == os.sched_getaffinity(0)  # the daemon: any
        assert (await status(url, token))["source"] == "daemon"  # live figures, asked of it

        os.kill(first, signal.SIGKILL)  # a crash of the API process ...
        await wait_until(lambda: pid_changed(state, first), "a new API process")
        second = api_pid(state)
        url, token = await wait_for_api(state, proc)
        # ... is a restart of the daemon's api loop (live figures may be up to live_cache_ms old)
        async with asyncio.timeout(60):
            while await api_restarts(url, token) < 1:
                await asyncio.sleep(0.2)
        assert proc.returncode is None  # and nothing else

        proc.kill()  # the daemon dies without a word: its API must not answer for it
        await proc.wait()
        await wait_until(lambda: not alive(second), "the API process gone with its daemon")
        assert proc.returncode == -signal.SIGKILL
