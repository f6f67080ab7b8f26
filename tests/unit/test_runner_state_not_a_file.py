"""A FIFO or a folder put at runner_state.json while the daemon runs (a mistaken ``mkfifo``, a
bind mount of a file that did not exist, which Docker makes a folder). Every save and every look
for edits fails while it stays. The daemon says once what is wrong and where, keeps its state in
memory, halts trading once (a crash would lose what the tracker keeps of each position there),
never blocks on the FIFO, and writes the file again once the path is free.

Before: the edit watcher's poll logged a traceback, then a warning at every try for as long as it
stayed (545 in 10 simulated hours of ``vigil run --sim``), each decision two errors (its own and
``trading already halted; also``), the first halt's save a traceback, and the message called a
FIFO a directory (``IsADirectoryError: ... is not a regular file``)."""

from __future__ import annotations

import asyncio
import json
import logging
import os
from pathlib import Path

import pytest
from test_decision_routine import Rig
from test_trading_state import BUY_AND_SELL, T0_MS

from broker.trading_state import TradingSwitch
from core.clock import VirtualClock
from state.store import RunnerStateStore

WHAT = {"fifo": "a FIFO", "folder": "a directory"}


@pytest.mark.parametrize("kind", ["fifo", "folder"])
async def test_a_fifo_or_folder_at_runner_state_is_said_once_and_the_state_kept(
    tmp_path: Path, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "runner_state.json"
    clock = VirtualClock(T0_MS)
    store = RunnerStateStore(path, clock)
    store.load()
    switch = TradingSwitch(clock, store, lambda _record: None)
    rig = Rig(BUY_AND_SELL.model_copy(update={"memory_update": "SOL looked strong."}))
    rig.routine._trading = switch
    rig.routine._store = store
    store.save()
    path.unlink()
    os.mkfifo(path) if kind == "fifo" else path.mkdir()
    caplog.set_level(logging.INFO)

    watcher = asyncio.create_task(store.watch(clock, 2.0))
    records = []
    for _ in range(4):
        await clock.advance(600)  # the watcher's looks for edits: dozens
        records.append(await rig.routine.decide_once(["agent_timer"]))
    watcher.cancel()

    assert all(f"{path} is not a regular file ({WHAT[kind]})" in r["state_error"] for r in records)
    assert switch.halted and "could not be saved" in switch.state.reason
    assert store.current.agent_memory == "SOL looked strong."  # kept in memory
    loud = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert not [r for r in loud if r.exc_info], "no traceback for a known condition"
    named = [
        r.getMessage()
        for r in loud
        if str(path) in r.getMessage() and "entries not placed" not in r.getMessage()
    ]  # each decision's skipped entries quote the halt's reason, as under any halt
    # once each: the store's look, the decision's save, the halt and its own save
    assert len(named) == 4, named
    assert sum(f"({WHAT[kind]})" in m and "in memory" in m for m in named) >= 1

    caplog.clear()
    path.unlink() if kind == "fifo" else path.rmdir()
    record = await rig.routine.decide_once(["agent_timer"])
    assert "state_error" not in record
    saved = json.loads(path.read_text())
    assert saved["agent_memory"] == "SOL looked strong." and saved["trading"]["mode"] == "halted"
    assert [r.getMessage() for r in caplog.records if "saved again" in r.getMessage()]
