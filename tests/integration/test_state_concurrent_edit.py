"""A person's editor (a real separate process) edits runner_state.json while the daemon saves.

The editor edits right after each daemon write (it waits for the daemon's new inode, then reads,
changes ``notes`` and writes), so its writes land at arbitrary points of the daemon's
poll/save cycle. Invariants checked, for in-place and rename-style editors:

- the editor never reads a partial daemon write (atomic replace);
- the daemon never merges an older edit after a newer one, and merges only text the person wrote;
- a rename-style edit is never mistaken for an invalid one, and (where the file system can
  exchange files atomically) none is lost;
- an in-place edit caught half-written is rejected, and any rejected text kept aside is a prefix
  of what the person wrote (in-place edits racing a save can be lost: see state/store.py);
- afterwards the file holds the daemon's latest values, and a further edit is merged.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from core.clock import VirtualClock
from state.atomic import SwapUnsupportedError, atomic_swap_bytes
from state.edits import StateEditReport
from state.models import render_state
from state.store import RunnerStateStore, StateSaveConflictError

EDITS = 100

_EDITOR = r"""
import json, os, sys, time
from pathlib import Path

path, style, count, record_dir = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
own_inode = None
for i in range(count):
    while os.stat(path).st_ino == own_inode:  # wait until the daemon has written again
        time.sleep(0.0002)
    data = path.read_bytes()
    try:
        raw = json.loads(data)
    except ValueError:
        print("read a partial state file:", data[:200], flush=True)
        sys.exit(3)
    raw["notes"] = f"edit {i}"
    text = (json.dumps(raw, indent=1) + "\n").encode()
    (record_dir / f"{i}.json").write_bytes(text)
    if style == "rename":
        swap = path.with_name(path.name + ".swp~")
        swap.write_bytes(text)
        own_inode = os.stat(swap).st_ino
        os.replace(swap, path)
    else:
        with path.open("r+b") as fh:
            own_inode = os.fstat(fh.fileno()).st_ino
            fh.truncate(0)
            fh.write(text)
"""


def _some(report: StateEditReport | None) -> list[StateEditReport]:
    return [] if report is None else [report]


def _exchange_supported(directory: Path) -> bool:
    probe = directory / "exchange-probe"
    probe.write_bytes(b"old")
    try:
        atomic_swap_bytes(probe, b"new")
    except SwapUnsupportedError:
        return False
    return True


def _edit_number(notes: str) -> int:
    assert notes.startswith("edit "), notes
    return int(notes.removeprefix("edit "))


@pytest.mark.parametrize("style", ["rename", "in-place"])
def test_person_edits_while_the_daemon_saves(tmp_path: Path, style: str) -> None:
    path = tmp_path / "state" / "runner_state.json"
    records = tmp_path / "edits"
    records.mkdir()
    store = RunnerStateStore(path, VirtualClock(epoch_ms=1_740_000_000_000))
    store.load()
    store.set_agent_memory("Start.")
    store.save()

    editor = subprocess.Popen(
        [sys.executable, "-c", _EDITOR, str(path), style, str(EDITS), str(records)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    reports: list[StateEditReport] = []
    retries = saves = 0
    try:
        while editor.poll() is None:
            saves += 1
            store.replace(trailing_highs={"BTC/USDT": 1000.0 + saves})
            try:
                reports += _some(store.poll())
                reports += store.save()
            except StateSaveConflictError as exc:  # the editor outpaced the save: retry later
                reports += exc.reports
                retries += 1
    finally:
        if editor.poll() is None:
            editor.kill()
        output = editor.communicate(timeout=30)[0].decode()
    assert editor.returncode == 0, output

    reports += store.save()  # the last edit may have landed after the last save
    merged = [
        change.new for r in reports if r.accepted for change in r.changes if change.field == "notes"
    ]
    numbers = [_edit_number(notes) for notes in merged]
    assert numbers == sorted(numbers), "an older edit was merged after a newer one"
    assert len(numbers) >= 1
    assert all(0 <= n < EDITS for n in numbers)
    rejected = [r for r in reports if not r.accepted]
    written = [p.read_bytes() for p in records.iterdir()]
    if style == "rename":
        assert rejected == []  # a renamed file is always whole
        if _exchange_supported(tmp_path):
            # every write of the store swaps out (and so sees) what it replaces
            assert sorted(set(numbers)) == list(range(EDITS)), "an edit was lost"
    for report in rejected:
        if report.preserved_as is not None:  # a half-written in-place edit that was kept aside
            kept = report.preserved_as.read_bytes()
            assert any(text.startswith(kept) for text in written)

    on_disk = json.loads(path.read_bytes())
    assert path.read_bytes() == render_state(store.current)
    assert on_disk["trailing_highs"] == {"BTC/USDT": 1000.0 + saves}
    assert on_disk["agent_memory"] == "Start."

    # with the storm over, one more edit by the same kind of editor is merged
    raw = dict(on_disk, notes="final edit")
    text = json.dumps(raw).encode()
    if style == "rename":
        swap = path.with_name("swap")
        swap.write_bytes(text)
        swap.replace(path)
    else:
        with path.open("r+b") as fh:
            fh.truncate(0)
            fh.write(text)
    final = store.poll()
    assert final is not None and final.changed_fields == ("notes",)
    assert store.current.notes == "final edit"
