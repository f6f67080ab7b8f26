"""A person's broken or partial edit of runner_state.json followed by a crash never blocks the
restart nor costs the daemon's own fields: the daemon's copy (``runner_state.last-good.json``)
holds them, the broken edit is reported and kept aside, and the last good notes stay."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest
from fakes.fifo import outcome_beside_fifo

from core.clock import VirtualClock
from core.errors import RefuseToStartError
from state.edit_checks import NOTES_MAX_CHARS
from state.last_good import last_good_path
from state.models import SCHEMA_VERSION
from state.store import RunnerStateStore
from state.trading import TradingState

EPOCH_MS = 1_740_000_000_000


def running(path: Path) -> RunnerStateStore:
    """A daemon that holds a position and has notes, saved (then it 'crashes': no more saves)."""
    store = RunnerStateStore(path, VirtualClock(EPOCH_MS))
    store.load()
    store.replace(entry_prices={"BTC/USDT": 97_000.0}, entry_times_ms={"BTC/USDT": 1})
    store.set_agent_memory("Funding is hot.")
    store.save()
    return store


def restarted(path: Path) -> RunnerStateStore:
    store = RunnerStateStore(path, VirtualClock(EPOCH_MS + 60_000))
    store.load()
    return store


def test_a_broken_edit_then_a_crash_restarts_with_the_daemon_state_and_last_notes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "runner_state.json"
    running(path)
    broken = path.read_bytes()[:-40]  # a partial save by an editor
    path.write_bytes(broken)
    with caplog.at_level(logging.ERROR):
        store = restarted(path)  # before: RefuseToStartError (exit 78)
    assert store.current.entry_prices == {"BTC/USDT": 97_000.0}
    assert store.current.agent_memory == "Funding is hot."
    assert store.last_report is not None and not store.last_report.accepted
    assert "rejected" in caplog.text
    (report,) = store.save()
    assert report.preserved_as is not None and report.preserved_as.read_bytes() == broken
    assert json.loads(path.read_bytes())["entry_prices"] == {"BTC/USDT": 97_000.0}


def test_a_partial_valid_edit_keeps_the_daemon_fields_and_takes_the_notes(tmp_path: Path) -> None:
    path = tmp_path / "runner_state.json"
    running(path)
    path.write_text(json.dumps({"schema_version": SCHEMA_VERSION, "notes": "watch SOL"}))
    store = restarted(path)
    assert store.current.entry_prices == {"BTC/USDT": 97_000.0}  # before: {} (lost)
    assert store.current.notes == "watch SOL"
    assert store.current.agent_memory == ""  # the person emptied it: their field
    assert store.last_report is not None and "entry_prices" in store.last_report.ignored_fields


def test_a_moved_aside_file_is_restored_from_the_daemon_copy(tmp_path: Path) -> None:
    path = tmp_path / "runner_state.json"
    running(path)
    path.rename(tmp_path / "aside.json")
    store = restarted(path)
    assert store.current.entry_prices == {"BTC/USDT": 97_000.0}
    store.save()
    assert json.loads(path.read_bytes())["agent_memory"] == "Funding is hot."


def test_a_kill_between_the_copy_and_the_shared_file_keeps_the_newer_daemon_state(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runner_state.json"
    store = running(path)
    older = path.read_bytes()
    store.replace(entry_prices={"BTC/USDT": 97_000.0, "ETH/USDT": 2_500.0})
    store.save()
    path.write_bytes(older)  # as if the kill fell after the copy, before the shared file
    assert set(restarted(path).current.entry_prices) == {"BTC/USDT", "ETH/USDT"}


def test_a_file_from_a_newer_vigil_still_refuses(tmp_path: Path) -> None:
    path = tmp_path / "runner_state.json"
    running(path)
    path.write_text(json.dumps({"schema_version": SCHEMA_VERSION + 1}))
    with pytest.raises(RefuseToStartError, match="newer"):
        restarted(path)


def _with_reason(path: Path, reason: str) -> bytes:
    raw = json.loads(path.read_bytes())
    raw["trading"] = {"mode": "halted", "reason": reason, "by": "cli"}
    return json.dumps(raw).encode()


def test_a_halt_reason_edited_in_while_stopped_with_a_line_break_is_rejected_and_kept(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runner_state.json"
    running(path)
    edit = _with_reason(path, "audit\n12:00:00 INFO runner: trading resumed")
    path.write_bytes(edit)
    store = restarted(path)
    assert not store.current.trading.halted
    report = store.last_report
    assert report is not None and not report.accepted
    assert "trading.reason" in (report.error or "") and "U+000A at position 5" in (
        report.error or ""
    )
    (kept,) = store.save()
    assert kept.preserved_as is not None and kept.preserved_as.read_bytes() == edit


def test_a_line_break_the_daemon_stored_before_the_check_still_loads_and_is_kept(
    tmp_path: Path,
) -> None:
    """The check judges what an edit changes: an older vigil stored its own halt reasons as they
    came (an error's message, line breaks and all); refusing that file and its copy would refuse
    the start."""
    path = tmp_path / "runner_state.json"
    store = running(path)
    old = TradingState(mode="halted", reason="broker start: line one\nline two", by="daemon")
    store.set_trading(old)
    store.save()
    again = restarted(path)
    assert again.current.trading == old
    path.write_bytes(path.read_bytes().replace(b'"notes": ""', b'"notes": "watch SOL"'))
    report = again.poll()
    assert report is not None and report.accepted and report.changed_fields == ("notes",)
    assert again.current.trading == old


def test_notes_over_the_cap_edited_in_while_stopped_are_rejected_and_kept(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runner_state.json"
    running(path)
    raw = json.loads(path.read_bytes())
    edit = json.dumps({**raw, "notes": "n" * (NOTES_MAX_CHARS + 1)}).encode()
    path.write_bytes(edit)
    store = restarted(path)
    assert store.current.notes == ""
    report = store.last_report
    assert report is not None and not report.accepted
    assert "field 'notes' is 1,048,577 characters, over the 1,048,576" in (report.error or "")
    (kept,) = store.save()
    assert kept.preserved_as is not None and kept.preserved_as.read_bytes() == edit


def test_notes_over_the_cap_stored_before_the_cap_still_load_and_are_kept(tmp_path: Path) -> None:
    """An older vigil merged any length; its file and its own copy must still start."""
    path = tmp_path / "runner_state.json"
    running(path)
    long_notes = "n" * (NOTES_MAX_CHARS + 10)
    saved = json.dumps({**json.loads(path.read_bytes()), "notes": long_notes}).encode()
    path.write_bytes(saved)
    last_good_path(path).write_bytes(saved)  # as that vigil saved it: both files alike
    again = restarted(path)
    assert again.current.notes == long_notes
    edited = json.loads(path.read_bytes())
    edited["agent_memory"] = "Funding cooled."
    path.write_text(json.dumps(edited))
    report = again.poll()
    assert report is not None and report.accepted and report.changed_fields == ("agent_memory",)
    assert again.current.notes == long_notes


@pytest.mark.parametrize("kind", ["fifo", "huge"])
def test_a_daemon_copy_that_is_not_a_small_file_refuses_the_start_unread(
    tmp_path: Path, kind: str
) -> None:
    """A FIFO there blocked the start in ``read_bytes`` until someone wrote to it; a sparse
    file of gigabytes was read whole."""
    path = tmp_path / "runner_state.json"
    running(path)
    copy = last_good_path(path)
    copy.unlink()
    if kind == "fifo":
        os.mkfifo(copy)
    else:
        with copy.open("wb") as handle:
            handle.truncate(2 << 30)
    outcome = outcome_beside_fifo(lambda: restarted(path), copy)
    assert isinstance(outcome, RefuseToStartError), outcome
    assert str(copy) in str(outcome)
    assert ("not a regular file" if kind == "fifo" else "over the") in str(outcome)
    assert copy.is_fifo() if kind == "fifo" else copy.stat().st_size == 2 << 30
