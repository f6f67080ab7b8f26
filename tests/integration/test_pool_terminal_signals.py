"""A worker of vigil's pools and the signals a terminal sends its whole process group: Ctrl-C
(SIGINT) and a closing terminal or dropped SSH session (SIGHUP) reach the replay's tick, analyst
and fit workers with the replay. The replay stops in order on them (README), but each worker died
first: Ctrl-C printed its KeyboardInterrupt traceback, and the replay logged "the analysts'
process is gone ... running them in the replay's process from now on" and did that work again
while stopping. The workers now leave both signals to the process that started them, which
shuts its pools down (and a worker still exits when its parent is gone)."""

from __future__ import annotations

import os
import signal
import sys

import pytest

from core.child_process import spawn_pool

WAIT_SECS = 120.0  # a spawned worker's start on a loaded host: a hang's bound, not a speed


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="POSIX signals")
def test_a_pool_worker_leaves_the_terminals_signals_to_its_parent(
    capfd: pytest.CaptureFixture[str],
) -> None:
    pool = spawn_pool(1)
    try:
        worker = pool.submit(os.getpid).result(timeout=WAIT_SECS)
        for sig in (signal.SIGINT, signal.SIGHUP):
            os.kill(worker, sig)
            # the same worker takes the next job: one the signal ended broke the pool
            assert pool.submit(os.getpid).result(timeout=WAIT_SECS) == worker
    finally:
        pool.shutdown()
    assert "KeyboardInterrupt" not in capfd.readouterr().err
