"""The signals that stop a vigil process in order, the same way for the daemon, a replay, the API.

SIGTERM is ``docker stop``, SIGINT is Ctrl-C, and SIGHUP is the terminal it runs in closing (or an
SSH session dropping). Left at its default, SIGHUP killed the process on the spot: no journal
flush, no state save, the API's child orphaned until its stdin closed. A process started under
``nohup`` (SIGHUP ignored) keeps ignoring it: that is what its operator asked for.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable, Coroutine
from contextlib import suppress
from typing import Any


def stop_signals() -> tuple[signal.Signals, ...]:
    """The signals to stop on now: SIGHUP only where it is not already ignored."""
    hangup = () if signal.getsignal(signal.SIGHUP) == signal.SIG_IGN else (signal.SIGHUP,)
    return (signal.SIGTERM, signal.SIGINT, *hangup)


def on_stop_signals(loop: asyncio.AbstractEventLoop, stop: Callable[[str], object]) -> None:
    """Call ``stop(signal name)`` on each stop signal (replacing any handler set before)."""
    for sig in stop_signals():
        with suppress(NotImplementedError):  # no signal handlers on this platform's loop
            loop.add_signal_handler(sig, stop, sig.name)


async def until_stop_signal(work: Coroutine[Any, Any, None]) -> None:
    """Run ``work`` until it ends, or until a stop signal cancels it (its ``finally`` blocks run)
    and then return as a normal stop. ``vigil sim`` had no handlers: SIGTERM and SIGHUP killed it
    with its servers open, and Ctrl-C was a KeyboardInterrupt (exit 130)."""
    task = asyncio.ensure_future(work)
    signalled: list[str] = []

    def stop(name: str) -> None:
        signalled.append(name)
        task.cancel()

    on_stop_signals(asyncio.get_running_loop(), stop)
    try:
        await task
    except asyncio.CancelledError:
        if not signalled:
            raise
