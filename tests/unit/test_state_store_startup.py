"""RunnerStateStore: startup checks, and the daemon's own changes and writes."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
from state_store_support import (
    EPOCH_MS,
    files_in,
    loaded_store,
    on_disk,
    state_path,
)

from core.clock import VirtualClock
from core.errors import RefuseToStartError
from state.atomic import tmp_path_for
from state.models import SCHEMA_VERSION, RunnerState, render_state
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


def test_render_matches_what_the_store_writes(store: RunnerStateStore, path: Path) -> None:
    assert path.read_bytes() == render_state(store.current)
