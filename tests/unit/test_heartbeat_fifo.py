"""A FIFO where the heartbeat writes (a mistaken ``mkfifo`` at ``heartbeat`` in a replay's run
folder, or at the daemon's ``heartbeat.tmp``): the write's ``open`` waited for a reader for good,
on the event loop, so the replay or the daemon stopped at its first beat. The replay's beat now
fails (``OSError``: the loop logs it and goes on, as for a full disk), with or without a reader;
the daemon's is written to a fresh temporary name, so nothing at ``heartbeat.tmp`` is opened."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest
from fakes.fifo import outcome_beside_fifo_writer

from core.clock import VirtualClock
from runner.heartbeat import Heartbeat


@pytest.mark.parametrize("atomic", [True, False], ids=["daemon", "replay"])
@pytest.mark.parametrize("reader", [False, True], ids=["no reader", "a reader"])
def test_a_fifo_where_the_beat_is_written_fails_the_beat_not_the_loop(
    tmp_path: Path, atomic: bool, reader: bool
) -> None:
    path = tmp_path / "heartbeat"
    fifo = path.with_name(path.name + ".tmp") if atomic else path
    os.mkfifo(fifo)
    heartbeat = Heartbeat(VirtualClock(epoch_ms=1_700_000_000_000), path, 30.0, atomic=atomic)
    with contextlib.ExitStack() as stack:
        if reader:  # one that never reads: a write must not wait for it either
            stack.callback(os.close, os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))
        got = outcome_beside_fifo_writer(heartbeat.beat, fifo)
    if atomic:
        assert got is None and heartbeat.beats == 1 and path.is_file()
    else:
        assert isinstance(got, OSError), got
        assert heartbeat.beats == 0
    assert fifo.exists() and not fifo.is_file()
