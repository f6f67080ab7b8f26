"""RunnerStateStore: a person editing the file while the daemon runs (poll, save, the watch loop),
with both kinds of editor (``state_store_support``)."""

from __future__ import annotations

import asyncio
import logging
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from property_budget import examples
from state_store_support import (
    EDITORS,
    EPOCH_MS,
    Editor,
    edit_by_rename,
    edit_in_place,
    files_in,
    loaded_store,
    on_disk,
    state_path,
    with_changes,
)

from core.clock import VirtualClock
from state import state_file
from state.edit_checks import NOTES_MAX_CHARS
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


def _halted(reason: str, by: str = "me") -> dict[str, str]:
    return {"mode": "halted", "reason": reason, "by": by}


INVALID_EDITS = [
    pytest.param(lambda p: b'{"schema_version": 1, "notes": "unfinished', id="bad-json"),
    pytest.param(lambda p: with_changes(p, agent_memory="y" * 600), id="memory-too-long"),
    pytest.param(lambda p: with_changes(p, notes=12), id="wrong-type"),
    pytest.param(lambda p: with_changes(p, note="typo"), id="unknown-key"),
    pytest.param(lambda p: with_changes(p, schema_version=2), id="newer-schema"),
    # json's own limits, which it raises as ValueError and RecursionError, not as a syntax error
    pytest.param(lambda p: b'{"notes": ' + b"7" * 5000 + b"}", id="number-too-long"),
    pytest.param(lambda p: b'{"extra": {"x": ' + b"[" * 100_000 + b"]}}", id="nested-too-deep"),
    # valid JSON, but half a surrogate pair: accepted, it failed every later save
    pytest.param(lambda p: with_changes(p, notes="a\ud800b"), id="lone-surrogate"),
    # a halt reason is printed into one log line: a line break in it forged log lines
    pytest.param(lambda p: with_changes(p, trading=_halted("x\n12:00 INFO ok")), id="reason-lf"),
    pytest.param(lambda p: with_changes(p, trading=_halted("x", by="ops\x1b[2J")), id="by-esc"),
    # the API's body ceiling caps the notes it takes; an editor's were unbounded
    pytest.param(lambda p: with_changes(p, notes="n" * (NOTES_MAX_CHARS + 1)), id="notes-too-long"),
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


def test_notes_at_the_cap_are_merged(store: RunnerStateStore, path: Path) -> None:
    edit_in_place(path, with_changes(path, notes="n" * NOTES_MAX_CHARS))
    report = store.poll()
    assert report is not None and report.accepted and report.changed_fields == ("notes",)
    assert len(store.current.notes) == NOTES_MAX_CHARS


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


def test_an_emptied_file_is_written_back_without_a_copy(
    store: RunnerStateStore, path: Path
) -> None:
    edit_in_place(path, b"")
    report = store.poll()
    assert report is not None and report.error == "the file is empty"
    assert store.save() == ()  # reported at the poll; there is no text to keep
    assert files_in(path.parent) == ["runner_state.json"]
    assert on_disk(path)["agent_memory"] == "Trend is up on 4h."


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
    # looking now fails with an OSError (ELOOP); a folder or FIFO there is no failure to retry
    # but a condition said once (tests/unit/test_runner_state_not_a_file.py)
    path.symlink_to(path.name)
    task = asyncio.create_task(store.watch(clock, interval_secs=1.0))
    try:
        with caplog.at_level(logging.WARNING, logger="state.store"):
            await clock.advance(0)
            await clock.advance(1.0)
            for _ in range(3):
                await clock.advance(60.0)  # the backoff is capped at 60 s of clock time
            failures = [r for r in caplog.records if "for edits failed" in r.message]
            assert len(failures) >= 4 and "(4 in a row)" in caplog.text
            # one traceback a streak: a folder or FIFO left there logged one at every try
            assert [bool(r.exc_info) for r in failures] == [True] + [False] * (len(failures) - 1)
            path.unlink()
            edit_by_rename(path, good.replace(b'"notes": ""', b'"notes": "back"'))
            for _ in range(10):
                if store.current.notes == "back":
                    break
                await clock.advance(60.0)
        assert store.current.notes == "back"
        assert f"works again after {len(failures)} failures" in caplog.text
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_watch_rejects_a_non_positive_interval(
    store: RunnerStateStore, clock: VirtualClock
) -> None:
    with pytest.raises(ValueError, match="interval_secs"):
        await store.watch(clock, 0)


# --- replay: a store that does not look for edits ---------------------------------------------


@settings(max_examples=examples(30), deadline=None)
@given(
    saves=st.lists(
        st.one_of(
            st.dictionaries(
                st.sampled_from(["BTC/USDT", "ETH/USDT", "SOL/USDT"]),
                st.floats(1.0, 1e6, allow_nan=False),
                max_size=3,
            ),
            st.none(),  # a save with nothing changed
        ),
        min_size=1,
        max_size=12,
    )
)
def test_a_store_without_edits_writes_what_the_watching_one_writes(
    saves: list[dict[str, float] | None],
) -> None:
    """Replay's store trusts what it last wrote instead of reading the file before each save;
    with nobody editing, every save leaves the same bytes as the watching store's."""
    with tempfile.TemporaryDirectory() as folder:
        clock = VirtualClock(epoch_ms=EPOCH_MS)
        paths = [state_path(Path(folder) / name) for name in ("watching", "trusting")]
        stores = [RunnerStateStore(paths[0], clock), RunnerStateStore(paths[1], clock, edits=False)]
        for store in stores:
            store.load()
        for prices in saves:
            for store in stores:
                if prices is not None:
                    store.replace(entry_prices=prices)
                assert store.save() == ()
            assert paths[0].read_bytes() == paths[1].read_bytes()


def test_a_store_without_edits_still_keeps_an_edit_the_swap_returns(
    path: Path, clock: VirtualClock
) -> None:
    """It does not read the file before saving, but the atomic exchange hands back what it
    replaced: an edit made anyway is judged and merged, never lost."""
    store = RunnerStateStore(path, clock, edits=False)
    store.load()
    store.replace(entry_prices={"BTC/USDT": 97000.0})
    store.save()
    edit_by_rename(path, with_changes(path, notes="a note made mid-replay"))
    store.replace(entry_prices={"BTC/USDT": 98000.0})
    (report,) = store.save()
    assert report.accepted
    assert on_disk(path)["notes"] == "a note made mid-replay"
    assert on_disk(path)["entry_prices"] == {"BTC/USDT": 98000.0}
