"""A worker process of vigil's pools ends when the process that started it dies without shutting
the pool down (SIGKILL, the OOM killer). A ``ProcessPoolExecutor`` worker holds its own job
queue's write end, so it never sees the queue close: each orphan waited for ever, keeping its
memory (eleven of a helper's killed replays, about 130 MB each, were found on this host). Each
pool is opened in a child interpreter as the replay and the daemon open it, the child is killed,
and the worker must be gone; the bound is a hang's, not a speed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
GONE_WITHIN_SECS = 60.0

OPEN_POOL_THEN_WAIT = """
import os, sys, time
from runner.desk_ahead import MIN_DESK_DAYS, open_desk_pool
from regime.fit_pool import FitPool
from core.child_process import spawn_pool

if __name__ == "__main__":
    which = sys.argv[1]
    if which == "desk":
        pool = open_desk_pool(MIN_DESK_DAYS)
    elif which == "fits":
        pool = FitPool(workers=1)._executor()
    else:
        pool = spawn_pool(1)
    print(pool.submit(os.getpid).result(), flush=True)
    time.sleep(3600)
"""


def _gone(pid: int) -> bool:
    """Exited (a zombie counts: nobody may reap an orphan in a container)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    return "\nState:\tZ" in status


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core: the desk runs inline")
@pytest.mark.parametrize("which", ["desk", "fits", "spawn_pool"])
def test_a_pool_worker_exits_when_its_parent_is_killed(which: str, tmp_path: Path) -> None:
    script = tmp_path / "parent.py"  # a file: spawn re-imports the parent's main module
    script.write_text(OPEN_POOL_THEN_WAIT)
    parent = subprocess.Popen(
        [sys.executable, str(script), which],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        text=True,
    )
    worker = 0
    try:
        assert parent.stdout is not None
        worker = int(parent.stdout.readline())
        assert not _gone(worker)
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=GONE_WITHIN_SECS)
        deadline = time.monotonic() + GONE_WITHIN_SECS
        while not _gone(worker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _gone(worker), f"the {which} worker {worker} outlived its killed parent"
    finally:
        parent.kill()
        parent.wait()
        if worker and not _gone(worker):
            os.kill(worker, signal.SIGKILL)
