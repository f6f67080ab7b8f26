"""RunnerStateStore(durable=False), replay's store: the same files as a durable store, no fsync."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes.fsync_counter import count_fsyncs
from state_store_support import EPOCH_MS

from core.clock import VirtualClock
from state.last_good import last_good_path
from state.store import RunnerStateStore


def _saves(path: Path, clock: VirtualClock, *, durable: bool) -> None:
    store = RunnerStateStore(path, clock, edits=False, durable=durable)
    store.load()
    store.replace(entry_prices={"BTC/USDT": 97000.0}, entry_times_ms={"BTC/USDT": EPOCH_MS})
    store.save()
    store.replace(entry_prices={"BTC/USDT": 97000.0, "ETH/USDT": 3100.5})
    store.save()
    store.set_agent_memory("Trend is up on 4h.")
    store.save()
    store.save()  # unchanged: writes nothing


def test_a_store_that_is_not_durable_writes_the_same_files_without_fsync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced = count_fsyncs(monkeypatch)
    clock = VirtualClock(EPOCH_MS)
    durable = tmp_path / "durable" / "runner_state.json"
    quick = tmp_path / "quick" / "runner_state.json"
    _saves(durable, clock, durable=True)
    assert synced  # the durable store fsyncs
    synced.clear()
    _saves(quick, clock, durable=False)
    assert synced == []
    for made, reference in ((quick, durable), (last_good_path(quick), last_good_path(durable))):
        assert made.read_bytes() == reference.read_bytes()
    assert sorted(p.name for p in quick.parent.iterdir()) == sorted(
        p.name for p in durable.parent.iterdir()
    )
