"""Helpers shared by the RunnerStateStore tests (test_state_store_*.py): the two kinds of editor,
the file as JSON, a loaded store. No tests here.

Both kinds of editor are exercised: in place (same inode, truncated and rewritten, like
``echo >`` or vim with backupcopy=yes) and rename-style (a new file renamed over the old one,
like most editors' safe write).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from core.clock import VirtualClock
from state.store import RunnerStateStore

EPOCH_MS = 1_740_000_000_000  # 2025-02-19T21:20:00Z
Editor = Callable[[Path, bytes], None]


def edit_in_place(path: Path, data: bytes) -> None:
    with path.open("r+b") as fh:
        fh.truncate(0)
        fh.write(data)


def edit_by_rename(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".editor-swap")
    tmp.write_bytes(data)
    os.replace(tmp, path)


EDITORS = [pytest.param(edit_in_place, id="in-place"), pytest.param(edit_by_rename, id="rename")]


def with_changes(path: Path, **changes: Any) -> bytes:
    """The file's current JSON with ``changes`` applied, indented like a person would leave it."""
    raw = json.loads(path.read_bytes())
    raw.update(changes)
    return (json.dumps(raw, indent=4) + "\n").encode()


def on_disk(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_bytes())
    return loaded


def files_in(directory: Path) -> list[str]:
    """The files beside the state, but the daemon's own copy (``state.last_good``, tested in
    test_state_last_good.py), which every save writes first."""
    return sorted(p.name for p in directory.iterdir() if p.name != "runner_state.last-good.json")


def state_path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "runner_state.json"


def loaded_store(path: Path, clock: VirtualClock) -> RunnerStateStore:
    """A loaded store whose file exists, holding one open position."""
    store = RunnerStateStore(path, clock)
    store.load()
    store.replace(entry_prices={"BTC/USDT": 97000.0}, entry_times_ms={"BTC/USDT": EPOCH_MS})
    store.set_agent_memory("Trend is up on 4h.")
    store.save()
    return store
