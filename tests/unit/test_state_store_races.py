"""RunnerStateStore: an edit landing during the write itself, in both write modes (atomic exchange,
and check-then-rename where the file system cannot exchange files)."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from state_store_support import (
    EDITORS,
    EPOCH_MS,
    Editor,
    edit_by_rename,
    files_in,
    loaded_store,
    on_disk,
    state_path,
    with_changes,
)

import state.atomic
from core.clock import VirtualClock
from core.errors import RetryableError
from state.store import RunnerStateStore


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock(epoch_ms=EPOCH_MS)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return state_path(tmp_path)


@pytest.fixture
def store(path: Path, clock: VirtualClock) -> RunnerStateStore:
    """A loaded store whose file exists, holding one open position."""
    return loaded_store(path, clock)


@pytest.fixture(params=["exchange", "check-then-rename"])
def write_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways the store can write: atomic exchange, and the fallback where it is unsupported."""
    if request.param == "check-then-rename":
        monkeypatch.setattr(state.atomic, "_libc_renameat2", lambda: None)
    mode: str = request.param
    return mode


def _edit_during_next_write(
    monkeypatch: pytest.MonkeyPatch, path: Path, edits: list[tuple[Editor, bytes]]
) -> None:
    """Make the store's writes meet a person's edit after its pre-write check: in exchange mode
    just before the exchange, in check-then-rename mode after the tmp file is durable and just
    before the final check and rename. The tightest spots a concurrent edit can land in."""
    real_swap = state.atomic.atomic_swap_bytes
    real_write = state.atomic.atomic_write_bytes

    def edit_now() -> None:
        if edits:
            editor, text = edits.pop(0)
            editor(path, text)

    def racing_swap(
        target: Path,
        data: bytes,
        *,
        durable: bool = True,
        before_replace: Callable[[Path], None] | None = None,
    ) -> tuple[os.stat_result, bytes | None]:
        if target == path:
            edit_now()
        return real_swap(target, data, durable=durable, before_replace=before_replace)

    def racing_write(
        target: Path,
        data: bytes,
        *,
        before_replace: Callable[[Path], None] | None = None,
        durable: bool = True,
    ) -> os.stat_result:
        def hook(tmp: Path) -> None:
            if target == path:
                edit_now()
            if before_replace is not None:
                before_replace(tmp)

        return real_write(target, data, before_replace=hook, durable=durable)

    # the store writes through state.atomic.replace_if_holds, which calls these two
    monkeypatch.setattr(state.atomic, "atomic_swap_bytes", racing_swap)
    monkeypatch.setattr(state.atomic, "atomic_write_bytes", racing_write)


@pytest.mark.parametrize("editor", EDITORS)
def test_an_edit_landing_during_the_write_is_merged_not_overwritten(
    write_mode: str,
    store: RunnerStateStore,
    path: Path,
    editor: Editor,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _edit_during_next_write(monkeypatch, path, [(editor, with_changes(path, notes="mid-save"))])
    store.replace(entry_prices={"ETH/USDT": 3000.0})
    (report,) = store.save()
    assert report.changed_fields == ("notes",)
    written = on_disk(path)
    assert written["notes"] == "mid-save"
    assert written["entry_prices"] == {"ETH/USDT": 3000.0}
    assert files_in(path.parent) == ["runner_state.json"]


@pytest.mark.parametrize("editor", EDITORS)
def test_an_invalid_edit_landing_during_the_write_is_kept_aside(
    write_mode: str,
    store: RunnerStateStore,
    path: Path,
    editor: Editor,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _edit_during_next_write(monkeypatch, path, [(editor, b'{"notes": "half')])
    store.replace(entry_prices={})
    found, kept = store.save()
    assert not found.accepted and not kept.accepted and kept.error == found.error
    assert kept.preserved_as is not None
    assert kept.preserved_as.read_bytes() == b'{"notes": "half'
    assert on_disk(path)["entry_prices"] == {}


def test_save_gives_up_when_the_file_keeps_changing(
    write_mode: str, store: RunnerStateStore, path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    edits: list[tuple[Editor, bytes]] = [
        (edit_by_rename, with_changes(path, notes=f"edit {i}")) for i in range(10)
    ]
    _edit_during_next_write(monkeypatch, path, edits)
    store.replace(entry_prices={})
    with pytest.raises(RetryableError, match="kept changing"):
        store.save()
    # no edit is lost: the newest is either still on disk or merged and written on the next save
    if write_mode == "exchange":
        assert store.current.notes == "edit 4"
        assert on_disk(path)["notes"] == "edit 3"
    else:
        assert store.current.notes == "edit 3"
        assert on_disk(path)["notes"] == "edit 4"
    monkeypatch.undo()
    store.save()
    assert on_disk(path)["notes"] == "edit 4"


def test_unsupported_exchange_is_logged_once(
    store: RunnerStateStore,
    path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(state.atomic, "_libc_renameat2", lambda: None)
    with caplog.at_level(logging.WARNING, logger="state.store"):
        for n in range(3):
            store.replace(entry_prices={"BTC/USDT": 1.0 + n})
            store.save()
    assert caplog.text.count("cannot swap files atomically") == 1
    assert on_disk(path)["entry_prices"] == {"BTC/USDT": 3.0}
