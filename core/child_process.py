"""Process pools whose workers end with the process that started them.

A ``ProcessPoolExecutor`` worker waits for its next job on a queue whose write end it holds
itself, so a parent that dies without shutting its pool down (SIGKILL, the OOM killer, a crash
in C) leaves it waiting for ever: each orphan keeps its memory (a replay's tick worker about
130 MB) and a sweep killed and resumed a few times piles them up. Each worker here watches its
parent's sentinel, which ``multiprocessing`` makes ready when the parent is gone, and exits then.

A terminal's Ctrl-C (SIGINT) and hang-up (SIGHUP) go to its whole process group, workers included.
The parent stops in order on them and shuts its pools down; a worker that took them died first (a
KeyboardInterrupt traceback, a pool broken mid-stop), so workers ignore both. SIGTERM keeps its
default: a stray ``kill`` still ends a worker, which its pool's owner survives.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
from concurrent.futures import ProcessPoolExecutor
from multiprocessing.connection import wait

#: a worker's exit status when its parent died first (sysexits EX_SOFTWARE: not a clean end)
EXIT_PARENT_GONE = 70


def spawn_pool(workers: int) -> ProcessPoolExecutor:
    """``workers`` spawned (not forked: the caller runs an event loop and threads, which a fork
    would copy mid-flight) processes, each exiting when this process is gone."""
    return ProcessPoolExecutor(
        workers, mp_context=multiprocessing.get_context("spawn"), initializer=_start_worker
    )


def _start_worker() -> None:
    """A pool worker's ``initializer``: the terminal's signals left to the parent, and an exit
    when the parent is gone."""
    for name in ("SIGINT", "SIGHUP"):
        if hasattr(signal, name):  # no SIGHUP off POSIX
            signal.signal(getattr(signal, name), signal.SIG_IGN)
    exit_with_parent()


def exit_with_parent() -> None:
    """In a child process: exit as soon as the parent is gone (a pool's ``initializer``)."""
    parent = multiprocessing.parent_process()
    if parent is None:  # not a multiprocessing child: nothing to watch
        return
    threading.Thread(
        target=_exit_when_ready, args=(parent.sentinel,), name="exit-with-parent", daemon=True
    ).start()


def _exit_when_ready(sentinel: int) -> None:
    wait([sentinel])
    # not sys.exit: the main thread is blocked on the queue the dead parent will never feed
    os._exit(EXIT_PARENT_GONE)


__all__ = ["EXIT_PARENT_GONE", "exit_with_parent", "spawn_pool"]
