"""RunnerStateStore: startup checks, daemon-owned changes, and a person editing while it runs.

Both kinds of editor are exercised: in place (same inode, truncated and rewritten, like
``echo >`` or vim with backupcopy=yes) and rename-style (a new file renamed over the old one,
like most editors' safe write).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import state.atomic
from core.clock import VirtualClock
from core.errors import RefuseToStartError, RetryableError
from state import state_file
from state.atomic import tmp_path_for
from state.models import SCHEMA_VERSION, RunnerState, render_state
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


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock(epoch_ms=EPOCH_MS)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "runner_state.json"


@pytest.fixture
def store(path: Path, clock: VirtualClock) -> RunnerStateStore:
    """A loaded store whose file exists, holding one open position."""
    store = RunnerStateStore(path, clock)
    store.load()
    store.replace(entry_prices={"BTC/USDT": 97000.0}, entry_times_ms={"BTC/USDT": EPOCH_MS})
    store.set_agent_memory("Trend is up on 4h.")
    store.save()
    return store


def files_in(directory: Path) -> list[str]:
    """The files beside the state, but the daemon's own copy (``state.last_good``, tested in
    test_state_last_good.py), which every save writes first."""
    return sorted(p.name for p in directory.iterdir() if p.name != "runner_state.last-good.json")


# --- startup -------------------------------------------------------------------------------


def test_missing_file_gives_defaults_and_creates_the_state_dir(
    path: Path, clock: VirtualClock
) -> None:
    store = RunnerStateStore(path, clock)
    assert not path.parent.exists()
    state = store.load()
    assert state == RunnerState()
    assert path.parent.is_dir()
    assert files_in(path.parent) == []  # nothing written until the first save
    store.save()
    assert on_disk(path)["schema_version"] == SCHEMA_VERSION


def test_state_dir_that_cannot_be_created_refuses_to_start(
    tmp_path: Path, clock: VirtualClock
) -> None:
    # A path below a regular file: mkdir fails even for root, which chmod would not stop.
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("x")
    store = RunnerStateStore(blocker / "state" / "runner_state.json", clock)
    with pytest.raises(RefuseToStartError, match=r"state dir .*not_a_dir/state cannot be created"):
        store.load()
    assert blocker.read_text() == "x"


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
def test_read_only_state_dir_refuses_to_start(tmp_path: Path, clock: VirtualClock) -> None:
    state_dir = tmp_path / "ro"
    state_dir.mkdir()
    state_dir.chmod(0o555)
    try:
        with pytest.raises(RefuseToStartError, match="Permission denied"):
            RunnerStateStore(state_dir / "runner_state.json", clock).load()
    finally:
        state_dir.chmod(0o755)


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b'{"schema_version": 1,\n "notes": oops}', r"not valid JSON at line 2 column 11"),
        (b'{"schema_version": 99}', r"schema_version 99 is newer than this vigil"),
        (b'{"schema_version": 1, "agent_memroy": "x"}', r"unknown key 'agent_memroy'"),
        (b'{"schema_version": 1, "entry_prices": {"BTC/USDT": "97k"}}', r"'entry_prices.BTC/USDT'"),
        (b'{"schema_version": 1, "agent_memory": "' + b"x" * 501 + b'"}', r"501 characters"),
    ],
    ids=["not-json", "newer-schema", "unknown-key", "wrong-type", "memory-too-long"],
)
def test_untrusted_file_refuses_to_start_and_is_left_alone(
    path: Path, clock: VirtualClock, content: bytes, expected: str
) -> None:
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    before = files_in(path.parent)
    with pytest.raises(RefuseToStartError, match=expected) as info:
        RunnerStateStore(path, clock).load()
    message = str(info.value)
    assert str(path) in message
    assert "move it aside" in message and "Nothing was changed" in message
    assert path.read_bytes() == content
    assert files_in(path.parent) == before


def test_a_directory_in_place_of_the_file_refuses_to_start(path: Path, clock: VirtualClock) -> None:
    path.mkdir(parents=True)
    with pytest.raises(RefuseToStartError, match="not a regular file"):
        RunnerStateStore(path, clock).load()


def test_load_reads_what_save_wrote(
    store: RunnerStateStore, path: Path, clock: VirtualClock
) -> None:
    again = RunnerStateStore(path, clock)
    assert again.load() == store.current
    assert again.current.entry_prices["BTC/USDT"] == 97000.0


def test_load_removes_tmp_files_of_an_interrupted_write(
    store: RunnerStateStore, path: Path, clock: VirtualClock, caplog: pytest.LogCaptureFixture
) -> None:
    stale = tmp_path_for(path)
    stale.write_bytes(b'{"half": ')
    with caplog.at_level(logging.WARNING, logger="state.store"):
        RunnerStateStore(path, clock).load()
    assert not stale.exists()
    assert files_in(path.parent) == ["runner_state.json"]
    assert f"removed {stale}" in caplog.text


def test_older_schema_is_migrated_and_rewritten_on_save(path: Path, clock: VirtualClock) -> None:
    path.parent.mkdir(parents=True)
    path.write_bytes(b'{"agent_memory": "from before versions.", "notes": "n"}')
    store = RunnerStateStore(path, clock)
    assert store.load().agent_memory == "from before versions."
    store.save()
    assert on_disk(path)["schema_version"] == SCHEMA_VERSION
    assert on_disk(path)["notes"] == "n"


def test_using_the_store_before_load_is_an_error(path: Path, clock: VirtualClock) -> None:
    store = RunnerStateStore(path, clock)
    for call in (lambda: store.current, store.poll, store.save):
        with pytest.raises(RuntimeError, match="load"):
            call()


# --- daemon-owned changes --------------------------------------------------------------------


async def test_daemon_changes_are_validated_and_timestamped(
    store: RunnerStateStore, clock: VirtualClock
) -> None:
    await clock.advance(10)
    state = store.replace(trailing_highs={"BTC/USDT": 98000.0})
    assert state.trailing_highs["BTC/USDT"] == 98000.0
    assert state.entry_prices["BTC/USDT"] == 97000.0  # untouched fields stay
    assert state.updated_at_ms == EPOCH_MS + 10_000
    with pytest.raises(ValueError, match="agent_memory"):
        store.replace(agent_memory="no")
    with pytest.raises(ValueError, match="notes"):
        store.update(lambda s: s.model_copy(update={"notes": "no"}))
    with pytest.raises(ValueError, match="greater than 0"):
        store.update(lambda s: s.model_copy(update={"entry_prices": {"ETH/USDT": 0.0}}))
    assert store.current == state


def test_update_applies_a_function_of_the_current_state(store: RunnerStateStore) -> None:
    def close_btc(state: RunnerState) -> RunnerState:
        prices = {k: v for k, v in state.entry_prices.items() if k != "BTC/USDT"}
        return state.model_copy(update={"entry_prices": prices})

    assert dict(store.update(close_btc).entry_prices) == {}


def test_agent_memory_is_clipped_at_a_sentence(store: RunnerStateStore) -> None:
    text = "Keep stops wide. " * 40
    kept = store.set_agent_memory(text)
    assert len(kept) <= 500 and kept.endswith("wide.")
    assert store.current.agent_memory == kept


def test_save_writes_only_when_something_changed(store: RunnerStateStore, path: Path) -> None:
    before = path.stat()
    assert store.save() == ()
    after = path.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    store.replace(entry_prices={})
    store.save()
    assert on_disk(path)["entry_prices"] == {}


# --- a person's edits --------------------------------------------------------------------------


def test_poll_without_a_change_reports_nothing(store: RunnerStateStore) -> None:
    assert store.poll() is None
    assert store.poll() is None


@pytest.mark.parametrize("editor", EDITORS)
def test_valid_edit_is_merged(
    store: RunnerStateStore, path: Path, editor: Editor, caplog: pytest.LogCaptureFixture
) -> None:
    inode = path.stat().st_ino
    editor(path, with_changes(path, notes="watch the FOMC on Wednesday", agent_memory="Be calm."))
    assert (path.stat().st_ino == inode) == (editor is edit_in_place)
    with caplog.at_level(logging.INFO, logger="state.store"):
        report = store.poll()
    assert report is not None and report.accepted
    assert report.changed_fields == ("agent_memory", "notes")
    assert report.ignored_fields == ()
    assert store.current.notes == "watch the FOMC on Wednesday"
    assert store.current.agent_memory == "Be calm."
    assert store.current.entry_prices["BTC/USDT"] == 97000.0
    assert "notes: '' -> 'watch the FOMC on Wednesday'" in caplog.text
    assert store.poll() is None  # seen once, reported once


@pytest.mark.parametrize("editor", EDITORS)
def test_edits_to_daemon_owned_fields_are_ignored_and_reported(
    store: RunnerStateStore, path: Path, editor: Editor, caplog: pytest.LogCaptureFixture
) -> None:
    editor(path, with_changes(path, notes="hi", entry_prices={"BTC/USDT": 1.0}))
    with caplog.at_level(logging.WARNING, logger="state.store"):
        report = store.poll()
    assert report is not None and report.accepted
    assert report.changed_fields == ("notes",)
    assert report.ignored_fields == ("entry_prices",)
    assert store.current.entry_prices["BTC/USDT"] == 97000.0
    assert "ignored changes to daemon-owned entry_prices" in caplog.text
    store.save()
    assert on_disk(path)["entry_prices"] == {"BTC/USDT": 97000.0}
    assert on_disk(path)["notes"] == "hi"


INVALID_EDITS = [
    pytest.param(lambda p: b'{"schema_version": 1, "notes": "unfinished', id="bad-json"),
    pytest.param(lambda p: with_changes(p, agent_memory="y" * 600), id="memory-too-long"),
    pytest.param(lambda p: with_changes(p, notes=12), id="wrong-type"),
    pytest.param(lambda p: with_changes(p, note="typo"), id="unknown-key"),
    pytest.param(lambda p: with_changes(p, schema_version=2), id="newer-schema"),
]


@pytest.mark.parametrize("editor", EDITORS)
@pytest.mark.parametrize("make_edit", INVALID_EDITS)
async def test_invalid_edit_is_rejected_kept_aside_and_last_good_state_stays(
    store: RunnerStateStore,
    path: Path,
    clock: VirtualClock,
    editor: Editor,
    make_edit: Callable[[Path], bytes],
    caplog: pytest.LogCaptureFixture,
) -> None:
    good = store.current
    rejected_text = make_edit(path)
    editor(path, rejected_text)
    await clock.advance(3)
    with caplog.at_level(logging.INFO, logger="state.store"):
        report = store.poll()
    assert report is not None and not report.accepted and report.error
    assert report.preserved_as is None
    assert store.current == good
    assert any(r.levelno == logging.ERROR and report.error in r.message for r in caplog.records)
    assert store.poll() is None  # the same bad text is reported once
    assert files_in(path.parent) == ["runner_state.json"]  # kept as is until the daemon writes

    store.replace(trailing_highs={"BTC/USDT": 99000.0})
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="state.store"):
        (saved,) = store.save()
    copy = path.with_name("runner_state.json.rejected-20250219T212003.000Z")
    assert copy.read_bytes() == rejected_text
    assert saved.preserved_as == copy and saved.error == report.error
    assert str(copy) in caplog.text
    written = on_disk(path)
    assert written["agent_memory"] == good.agent_memory
    assert written["trailing_highs"] == {"BTC/USDT": 99000.0}


@pytest.mark.parametrize("editor", EDITORS)
def test_invalid_edit_fixed_before_the_next_write_leaves_no_copy(
    store: RunnerStateStore, path: Path, editor: Editor
) -> None:
    original = path.read_bytes()
    editor(path, b"{ half written")
    assert store.poll() is not None
    editor(path, original.replace(b'"notes": ""', b'"notes": "fixed it"'))
    report = store.poll()
    assert report is not None and report.accepted
    store.save()
    assert files_in(path.parent) == ["runner_state.json"]
    assert store.current.notes == on_disk(path)["notes"] == "fixed it"


@pytest.mark.parametrize("editor", EDITORS)
def test_save_merges_an_edit_made_since_the_last_poll(
    store: RunnerStateStore, path: Path, editor: Editor
) -> None:
    editor(path, with_changes(path, notes="edited between polls"))
    store.replace(trailing_highs={"BTC/USDT": 97500.0})
    (report,) = store.save()
    assert report.changed_fields == ("notes",)
    written = on_disk(path)
    assert written["notes"] == "edited between polls"
    assert written["trailing_highs"] == {"BTC/USDT": 97500.0}


@pytest.mark.parametrize("editor", EDITORS)
def test_save_preserves_an_invalid_edit_made_since_the_last_poll(
    store: RunnerStateStore, path: Path, editor: Editor
) -> None:
    editor(path, b"not json at all")
    found, kept = store.save()
    assert not found.accepted and "not valid JSON" in (found.error or "")
    assert found.preserved_as is None and kept.preserved_as is not None
    assert kept.preserved_as.read_bytes() == b"not json at all"
    assert on_disk(path)["agent_memory"] == "Trend is up on 4h."


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

    def racing_swap(target: Path, data: bytes) -> tuple[os.stat_result, bytes | None]:
        if target == path:
            edit_now()
        return real_swap(target, data)

    def racing_write(
        target: Path, data: bytes, *, before_replace: Callable[[Path], None] | None = None
    ) -> os.stat_result:
        def hook(tmp: Path) -> None:
            if target == path:
                edit_now()
            if before_replace is not None:
                before_replace(tmp)

        return real_write(target, data, before_replace=hook)

    monkeypatch.setattr(state_file, "atomic_swap_bytes", racing_swap)
    monkeypatch.setattr(state_file, "atomic_write_bytes", racing_write)


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


def _edit_keeping_the_stamp(path: Path, old: bytes, new: bytes) -> None:
    """An equal-size in-place edit within one tick of file time: (mtime, size, inode) unchanged.
    File times are coarse on many systems; this sets mtime back to simulate that exactly."""
    before = path.stat()
    data = path.read_bytes()
    edited = data.replace(old, new)
    assert len(edited) == len(data) and edited != data
    edit_in_place(path, edited)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert state_file.FileStamp.of(path.stat()) == state_file.FileStamp.of(before)


def test_an_edit_hidden_by_coarse_file_times_right_after_a_write_is_still_seen(
    store: RunnerStateStore, path: Path
) -> None:
    _edit_keeping_the_stamp(path, b"Trend is up", b"Trend is dn")
    report = store.poll()
    assert report is not None and report.changed_fields == ("agent_memory",)


def test_save_sees_an_edit_that_poll_cannot(store: RunnerStateStore, path: Path) -> None:
    assert store.poll() is None  # confirms the stamp: from now on poll trusts it
    _edit_keeping_the_stamp(path, b"Trend is up", b"Trend is dn")
    assert store.poll() is None  # the documented limit of a stamp comparison
    (report,) = store.save()  # compares content, so the edit is merged, not overwritten
    assert report.changed_fields == ("agent_memory",)
    assert on_disk(path)["agent_memory"] == "Trend is dn on 4h."


def test_a_deleted_file_is_written_again(
    store: RunnerStateStore, path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path.unlink()
    with caplog.at_level(logging.WARNING, logger="state.store"):
        assert store.poll() is None
    assert "was deleted" in caplog.text
    store.save()
    assert on_disk(path)["entry_prices"] == {"BTC/USDT": 97000.0}


def test_report_summary_is_readable(store: RunnerStateStore, path: Path) -> None:
    edit_by_rename(path, with_changes(path, notes="n" * 200))
    report = store.poll()
    assert report is not None
    summary = report.summary()
    assert summary.startswith(f"edit of {path} merged: notes: '' -> 'nnn")
    assert "(0 -> 200 chars)" in summary


# --- the watch loop ----------------------------------------------------------------------------


async def test_watch_picks_up_edits_on_the_clock(
    store: RunnerStateStore, path: Path, clock: VirtualClock
) -> None:
    task = asyncio.create_task(store.watch(clock, interval_secs=2.0))
    try:
        await clock.advance(0)
        edit_by_rename(path, with_changes(path, notes="seen by the watcher"))
        assert store.current.notes == ""
        await clock.advance(2.0)
        assert store.current.notes == "seen by the watcher"
        assert store.last_report is not None and store.last_report.accepted
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_watch_logs_failures_and_keeps_going(
    store: RunnerStateStore, path: Path, clock: VirtualClock, caplog: pytest.LogCaptureFixture
) -> None:
    good = path.read_bytes()
    path.unlink()
    path.mkdir()  # reading now fails with an OSError
    task = asyncio.create_task(store.watch(clock, interval_secs=1.0))
    try:
        with caplog.at_level(logging.ERROR, logger="state.store"):
            await clock.advance(0)
            await clock.advance(1.0)
        failures = [r for r in caplog.records if "checking" in r.message and r.exc_info]
        assert len(failures) >= 2
        assert "(2 in a row)" in caplog.text
        path.rmdir()
        edit_by_rename(path, good.replace(b'"notes": ""', b'"notes": "back"'))
        for _ in range(10):  # the backoff is capped at 60 s of clock time
            if store.current.notes == "back":
                break
            await clock.advance(60.0)
        assert store.current.notes == "back"
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_watch_rejects_a_non_positive_interval(
    store: RunnerStateStore, clock: VirtualClock
) -> None:
    with pytest.raises(ValueError, match="interval_secs"):
        await store.watch(clock, 0)


def test_render_matches_what_the_store_writes(store: RunnerStateStore, path: Path) -> None:
    assert path.read_bytes() == render_state(store.current)


def test_an_emptied_file_is_written_back_without_a_copy(
    store: RunnerStateStore, path: Path
) -> None:
    edit_in_place(path, b"")
    report = store.poll()
    assert report is not None and report.error == "the file is empty"
    assert store.save() == ()  # reported at the poll; there is no text to keep
    assert files_in(path.parent) == ["runner_state.json"]
    assert on_disk(path)["agent_memory"] == "Trend is up on 4h."
