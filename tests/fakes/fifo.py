"""Calling what may block on a FIFO, without hanging the suite: a FIFO blocks an ordinary open
until someone writes to it. The call runs in a thread the test waits on; if it is still blocked
after ``HANG_GUARD_SECS`` (a guard against a hang only: a call that does not block returns in
microseconds) the FIFO is opened for writing, which releases it, and the test fails."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

HANG_GUARD_SECS = 60.0


def outcome_beside_fifo(call: Callable[[], object], fifo: Path) -> object:
    """What ``call`` returned, or the exception it raised (for the test to judge)."""
    got: list[object] = []

    def run() -> None:
        try:
            got.append(call())
        except BaseException as exc:  # handed to the test
            got.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(HANG_GUARD_SECS)
    if worker.is_alive():
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # the writer that releases it
        worker.join(HANG_GUARD_SECS)
        pytest.fail(f"blocked on the FIFO at {fifo}")
    return got[0]
