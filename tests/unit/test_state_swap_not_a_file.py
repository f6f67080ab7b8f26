"""The atomic exchange that saves runner_state.json (``state.atomic.replace_if_holds``, unchecked:
the store's ``put``; a replay's store saves with no look first) over something that is not a
regular file. It exchanged the new file in, then read what it had swapped out: a FIFO blocked
that read forever (the daemon's event loop with it), and a folder was left under a hidden
``.runner_state.json.<random>.tmp`` name with its contents, an ``IsADirectoryError`` raised.
Now the exchange is undone: the FIFO or folder is back at its name, untouched, nothing of the
write is left, and the error says what stands there."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from fakes.fifo import outcome_unless_blocked

from core.clock import VirtualClock
from state.atomic import replace_if_holds
from state.store import RunnerStateStore

HANG_GUARD_SECS = 30.0  # a guard against a hang only: a save that does not block takes microseconds


def _outcome(call: Callable[[], object], folder: Path) -> object:
    """What ``call()`` returned or raised; if it blocks on a FIFO anywhere in ``folder`` (the
    exchange moves it to a hidden name) past the guard, a writer releases it and the test fails."""
    return outcome_unless_blocked(
        call, lambda: list(folder.iterdir()), f"a FIFO in {folder}", HANG_GUARD_SECS
    )


@pytest.mark.parametrize("kind", ["fifo", "folder"])
def test_an_unchecked_exchange_over_a_fifo_or_folder_is_undone(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "runner_state.json"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()
        (path / "kept.txt").write_text("a person's file")
    error = _outcome(
        lambda: replace_if_holds(path, b"{}", None, check_before_exchange=False), tmp_path
    )
    assert isinstance(error, IsADirectoryError), error
    what = "a FIFO" if kind == "fifo" else "a directory"
    assert f"{path} is not a regular file ({what})" in str(error)
    assert [p.name for p in tmp_path.iterdir()] == ["runner_state.json"]
    if kind == "fifo":
        assert path.is_fifo()
    else:
        assert (path / "kept.txt").read_text() == "a person's file"


def test_a_replay_store_saving_over_a_fifo_says_so_and_does_not_block(tmp_path: Path) -> None:
    path = tmp_path / "runner_state.json"
    store = RunnerStateStore(path, VirtualClock(), edits=False, durable=False)
    store.load()
    store.save()
    path.unlink()
    os.mkfifo(path)
    store.replace(entry_prices={"BTC/USDT": 97_000.0})
    error = _outcome(store.save, tmp_path)
    assert isinstance(error, IsADirectoryError) and "(a FIFO)" in str(error), error
    assert path.is_fifo()
    path.unlink()
    store.save()  # kept in memory: written once the path is free
    assert b"97000" in path.read_bytes()
