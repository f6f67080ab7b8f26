"""Calling what may block on a FIFO, without hanging the suite: a FIFO blocks an ordinary open
until someone writes to it. The call runs in a thread the test waits on; if it is still blocked
after ``HANG_GUARD_SECS`` (a guard against a hang only: a call that does not block returns in
microseconds) the FIFO is opened for writing, which releases it, and the test fails."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import pytest

HANG_GUARD_SECS = 60.0


def outcome_beside_fifo(call: Callable[[], object], fifo: Path) -> object:
    """What ``call`` returned, or the exception it raised (for the test to judge)."""
    return outcome_unless_blocked(call, [fifo], f"the FIFO at {fifo}")


def outcome_beside_fifo_writer(call: Callable[[], object], fifo: Path) -> object:
    """``outcome_beside_fifo`` for a call that may block opening ``fifo`` to write: a reader
    releases it."""
    return outcome_unless_blocked(call, [fifo], f"the FIFO at {fifo}", release=os.O_RDONLY)


def outcome_unless_blocked(
    call: Callable[[], object],
    fifos: Callable[[], Iterable[Path]] | Iterable[Path],
    where: str,
    guard_secs: float = HANG_GUARD_SECS,
    release: int = os.O_WRONLY,
) -> object:
    """What ``call`` returned or raised; if it is still blocked after ``guard_secs``, a writer
    (``release``: a reader, for a call blocked writing) opens each of ``fifos`` (a callable:
    asked again each round, for a FIFO that moved) until it is released, and the test fails
    naming ``where``."""
    got: list[object] = []

    def run() -> None:
        try:
            got.append(call())
        except BaseException as exc:  # handed to the test
            got.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(guard_secs)
    if worker.is_alive():
        while worker.is_alive():
            for fifo in fifos() if callable(fifos) else fifos:
                with contextlib.suppress(OSError):  # ENXIO: no reader waits on this one
                    os.close(os.open(fifo, release | os.O_NONBLOCK))
            worker.join(0.05)
        pytest.fail(f"blocked on {where}")
    return got[0]


@contextlib.contextmanager
def released_fifo(fifo: Path, release: int = os.O_WRONLY) -> Iterator[Callable[[], bool]]:
    """For code that may block the test's own event loop on ``fifo`` (a server in the test's
    loop: ``outcome_beside_fifo`` cannot run it in a thread). After ``HANG_GUARD_SECS`` a thread
    opens the FIFO for writing whenever a reader waits on it (``release``: for reading, for code
    that may block writing), so the test ends; it yields whether that was ever needed (the test
    asserts it was not)."""
    stop = threading.Event()
    released: list[bool] = []

    def watch() -> None:
        if stop.wait(HANG_GUARD_SECS):
            return
        while not stop.is_set():
            with contextlib.suppress(OSError):  # ENXIO: no reader waits now
                os.close(os.open(fifo, release | os.O_NONBLOCK))
                released.append(True)
            stop.wait(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield lambda: bool(released)
    finally:
        stop.set()
        watcher.join()
