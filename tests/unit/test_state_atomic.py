"""atomic_write_bytes / atomic_swap_bytes in-process: content, mode, hooks, stale tmp files.

The crash cases (a process killed between write and rename) are in
tests/integration/test_state_atomic_crash.py.
"""

from __future__ import annotations

import itertools
import os
import stat
from pathlib import Path

import pytest
from fakes.fsync_counter import count_fsyncs

import state.atomic
from state.atomic import (
    SwapUnsupportedError,
    atomic_swap_bytes,
    atomic_write_bytes,
    is_tmp_file_of,
    overwrite_bytes,
    remove_stale_tmp_files,
    tmp_path_for,
)


def test_writes_new_file_and_replaces_existing(tmp_path: Path) -> None:
    target = tmp_path / "model.json"
    written = atomic_write_bytes(target, b"first")
    assert target.read_bytes() == b"first"
    assert written.st_ino == target.stat().st_ino
    atomic_write_bytes(target, b"second, longer")
    assert target.read_bytes() == b"second, longer"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.json"]  # no tmp left


def test_new_file_mode_follows_umask_and_existing_mode_is_kept(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    old_umask = os.umask(0o022)
    try:
        atomic_write_bytes(target, b"a")
    finally:
        os.umask(old_umask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    target.chmod(0o640)
    atomic_write_bytes(target, b"b")
    assert stat.S_IMODE(target.stat().st_mode) == 0o640


def test_hook_runs_with_durable_tmp_before_rename(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    target.write_bytes(b"old")
    seen: list[tuple[bytes, bytes]] = []

    def hook(tmp: Path) -> None:
        assert is_tmp_file_of(tmp, target)
        seen.append((tmp.read_bytes(), target.read_bytes()))

    atomic_write_bytes(target, b"new", before_replace=hook)
    assert seen == [(b"new", b"old")]
    assert target.read_bytes() == b"new"


def test_failing_hook_leaves_target_untouched_and_no_tmp(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    target.write_bytes(b"old")

    def hook(_tmp: Path) -> None:
        raise RuntimeError("someone edited the file")

    with pytest.raises(RuntimeError, match="someone edited"):
        atomic_write_bytes(target, b"new", before_replace=hook)
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]


def test_failed_rename_removes_tmp(tmp_path: Path) -> None:
    target = tmp_path / "is_a_dir"
    (target / "child").mkdir(parents=True)
    with pytest.raises(OSError):
        atomic_write_bytes(target, b"x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["is_a_dir"]


def test_tmp_names_are_recognised_only_for_their_target(tmp_path: Path) -> None:
    target = tmp_path / "runner_state.json"
    tmp = tmp_path_for(target)
    assert tmp.parent == tmp_path
    assert is_tmp_file_of(tmp, target)
    assert not is_tmp_file_of(tmp, tmp_path / "other.json")
    assert not is_tmp_file_of(tmp_path / ".runner_state.json.notes.tmp", target)
    assert not is_tmp_file_of(target, target)


def test_remove_stale_tmp_files_removes_only_ours(tmp_path: Path) -> None:
    target = tmp_path / "runner_state.json"
    target.write_bytes(b"keep")
    stale = [tmp_path_for(target), tmp_path_for(target)]
    for path in stale:
        path.write_bytes(b"half")
    unrelated = [tmp_path / ".other.json.0123456789abcdef.tmp", tmp_path / "notes.tmp"]
    for path in unrelated:
        path.write_bytes(b"x")
    removed = remove_stale_tmp_files(target)
    assert sorted(removed) == sorted(stale)
    assert all(not p.exists() for p in stale)
    assert all(p.exists() for p in unrelated)
    assert target.read_bytes() == b"keep"
    assert remove_stale_tmp_files(tmp_path / "missing_dir" / "x.json") == []


# --- atomic_swap_bytes ---------------------------------------------------------------------------


def test_swap_returns_exactly_what_it_replaced(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    target.write_bytes(b"a person's edit")
    target.chmod(0o600)
    written, previous = atomic_swap_bytes(target, b"daemon's state")
    assert previous == b"a person's edit"
    assert target.read_bytes() == b"daemon's state"
    assert written.st_ino == target.stat().st_ino
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]


def test_swap_creates_a_missing_file(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    _, previous = atomic_swap_bytes(target, b"first")
    assert previous is None
    assert target.read_bytes() == b"first"


def test_swap_never_creates_over_a_file_that_appeared_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The target is missing when the exchange is tried, then someone creates it before the
    # create-if-absent rename: the swap must exchange with that file, not clobber it.
    target = tmp_path / "state.json"
    real = state.atomic._renameat2
    calls: list[int] = []

    def racing_renameat2(src: Path, dst: Path, flags: int) -> None:
        calls.append(flags)
        if len(calls) == 2:
            dst.write_bytes(b"appeared")
        real(src, dst, flags)

    monkeypatch.setattr(state.atomic, "_renameat2", racing_renameat2)
    _, previous = atomic_swap_bytes(target, b"ours")
    assert previous == b"appeared"
    assert target.read_bytes() == b"ours"
    exchange, create = state.atomic._RENAME_EXCHANGE, state.atomic._RENAME_NOREPLACE
    assert calls == [exchange, create, exchange]


def test_swap_hook_that_raises_changes_nothing(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    target.write_bytes(b"old")
    seen: list[bytes] = []

    def refuse(tmp: Path) -> None:
        seen.append(tmp.read_bytes())
        raise RuntimeError("changed meanwhile")

    with pytest.raises(RuntimeError):
        atomic_swap_bytes(target, b"new", before_replace=refuse)
    assert seen == [b"new"]  # it ran with the data in place, just before the exchange
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]


def test_swap_unsupported_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(state.atomic, "_libc_renameat2", lambda: None)
    target = tmp_path / "state.json"
    target.write_bytes(b"old")
    with pytest.raises(SwapUnsupportedError):
        atomic_swap_bytes(target, b"new")
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]


def test_overwrite_leaves_exactly_the_new_bytes(tmp_path: Path) -> None:
    target = tmp_path / "session.json"
    overwrite_bytes(target, b"a longer first version")
    assert target.read_bytes() == b"a longer first version"
    overwrite_bytes(target, b"short")  # no tail of the old bytes left behind
    assert target.read_bytes() == b"short"
    overwrite_bytes(target, b"")
    assert target.read_bytes() == b""


# atomic_swap_bytes needs the exchange (the state file falls back to atomic_write_bytes without)
@pytest.mark.parametrize(("write", "exchange"), [("write", True), ("write", False), ("swap", True)])
def test_not_durable_puts_the_same_bytes_in_place_as_a_new_file_without_fsync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, write: str, exchange: bool
) -> None:
    synced = count_fsyncs(monkeypatch)
    if not exchange:  # where renameat2 is missing, atomic_write_bytes falls back to a rename
        monkeypatch.setattr(state.atomic, "_libc_renameat2", lambda: None)
    durable, quick = tmp_path / "durable.json", tmp_path / "quick.json"

    def put(target: Path, data: bytes, *, durable: bool) -> None:
        if write == "write":
            atomic_write_bytes(target, data, durable=durable)
        else:
            atomic_swap_bytes(target, data, durable=durable)

    inodes = []
    for data in (b'{"a": 1}', b'{"a": 1, "b": [2, 3]}', b"{}"):
        synced.clear()
        put(durable, data, durable=True)
        assert len(synced) == 2  # the file, then the directory
        synced.clear()
        put(quick, data, durable=False)
        assert synced == []
        assert quick.read_bytes() == durable.read_bytes() == data
        inodes.append(quick.stat().st_ino)
    # each write a new file put in place, never the old one rewritten: a new file is made while
    # the one it replaces still exists, so their inodes differ. Only neighbours are compared: a
    # deleted file's inode number may be given again (it was, with another suite beside this one)
    assert all(before != after for before, after in itertools.pairwise(inodes)), inodes
    assert sorted(p.name for p in tmp_path.iterdir()) == ["durable.json", "quick.json"]


def test_not_durable_keeps_the_mode_of_the_file_it_replaces(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    target.write_bytes(b"old")
    target.chmod(0o600)
    atomic_write_bytes(target, b"new", durable=False)
    assert (target.read_bytes(), stat.S_IMODE(target.stat().st_mode)) == (b"new", 0o600)


@pytest.mark.parametrize("leads_to", ["nowhere.json", "state.json"])  # dangling, a loop
def test_swap_over_a_symlink_that_leads_nowhere_puts_the_data_in_place(
    tmp_path: Path, leads_to: str
) -> None:
    """The exchange worked, then reading what it replaced followed the link and raised: a save
    that had put the daemon's state in place failed, and left the link under a hidden name."""
    target = tmp_path / "state.json"
    target.symlink_to(leads_to)
    _, previous = atomic_swap_bytes(target, b"daemon's state")
    # a link to nothing held nothing; the loop, swapped out, leads to the new file
    assert previous == (None if leads_to == "nowhere.json" else b"daemon's state")
    assert not target.is_symlink() and target.read_bytes() == b"daemon's state"
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]
