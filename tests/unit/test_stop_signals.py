"""Which signals stop a vigil process in order: SIGHUP too, unless the process was told to ignore it."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Iterator

import pytest

from runner.stop_signals import on_stop_signals, stop_signals


@pytest.fixture
def hangup_restored() -> Iterator[None]:
    before = signal.getsignal(signal.SIGHUP)
    yield
    signal.signal(signal.SIGHUP, before)


def test_a_hangup_stops_unless_it_is_ignored_as_nohup_asks(hangup_restored: None) -> None:
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    assert stop_signals() == (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    assert stop_signals() == (signal.SIGTERM, signal.SIGINT)


async def test_each_stop_signal_reaches_the_stop_with_its_name(hangup_restored: None) -> None:
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    loop = asyncio.get_running_loop()
    asked: list[str] = []
    arrived = asyncio.Event()

    def stop(name: str) -> None:
        asked.append(name)
        arrived.set()

    on_stop_signals(loop, stop)
    try:
        for sig in (signal.SIGHUP, signal.SIGTERM):
            arrived.clear()
            os.kill(os.getpid(), sig)
            await asyncio.wait_for(arrived.wait(), timeout=30)
    finally:
        for sig in stop_signals():
            loop.remove_signal_handler(sig)
    assert asked == ["SIGHUP", "SIGTERM"]
