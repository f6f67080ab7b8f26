"""Something other than a regular file where a person's file belongs is a clear error, never a
stall. A FIFO blocked an ordinary open until someone wrote to it; runner_state.json, MEMORY.md and
the rule files are read on the daemon's event loop, so a FIFO in place of one froze the daemon
(its poll and its save both hung). Each call runs in a thread the test waits on: a call that
blocks is reported, and released, instead of hanging the suite."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from fakes.fifo import outcome_beside_fifo

from core.clock import VirtualClock
from core.regular_file import (
    open_regular_text,
    read_bytes_or_none,
    read_regular_file,
    read_regular_text,
)
from market.recorded import (
    DataUnavailableError,
    fear_greed_path,
    funding_path,
    kline_path,
    load_fear_greed,
    load_funding,
    load_klines,
)
from memory.tiers import OrganisationTier, ProjectTier, TierError
from state.store import RunnerStateStore


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize(
    "read", [read_regular_file, read_regular_text, read_bytes_or_none, open_regular_text]
)
def test_each_reader_refuses_a_fifo_a_device_and_a_directory_without_blocking(
    read: Callable[[Path], object], fifo: Path, tmp_path: Path
) -> None:
    for path in (fifo, Path("/dev/null"), tmp_path):
        error = outcome_beside_fifo(lambda path=path: read(path), fifo)  # type: ignore[misc]
        assert isinstance(error, IsADirectoryError), error
        assert "not a regular file" in str(error)


def test_a_regular_file_reads_whole(tmp_path: Path) -> None:
    path = tmp_path / "notes.md"
    path.write_text("première\nseconde\n", encoding="utf-8")
    st, data = read_regular_file(path)
    assert (st.st_size, data) == (len(data), path.read_bytes())
    assert read_regular_text(path) == "première\nseconde\n"
    with open_regular_text(path) as handle:
        assert handle.readline() == "première\n"
    assert read_bytes_or_none(tmp_path / "missing") is None


def test_a_fifo_in_place_of_the_state_file_fails_poll_and_save_and_is_left(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runner_state.json"
    store = RunnerStateStore(path, VirtualClock())
    store.load()
    store.save()
    path.unlink()
    os.mkfifo(path)
    assert outcome_beside_fifo(store.poll, path) is None  # said once in the log, not raised
    error = outcome_beside_fifo(store.save, path)
    assert isinstance(error, IsADirectoryError) and f"{path} is not a regular file (a FIFO)" in str(
        error
    )
    assert path.is_fifo()  # a person's odd file is theirs to move: nothing replaced it


def test_a_fifo_as_memory_md_a_rule_or_a_policy_file_is_a_tier_error(tmp_path: Path) -> None:
    tier = ProjectTier(tmp_path)
    os.mkfifo(tier.memory_path)
    assert isinstance(outcome_beside_fifo(tier.notes, tier.memory_path), TierError)
    tier.rules_dir.mkdir()
    rule = tier.rules_dir / "btc.md"
    os.mkfifo(rule)
    assert isinstance(outcome_beside_fifo(tier.rules, rule), TierError)
    policy_dir = tmp_path / "org"
    policy_dir.mkdir()
    policy = policy_dir / "caps.toml"
    os.mkfifo(policy)
    assert isinstance(outcome_beside_fifo(OrganisationTier(policy_dir).load, policy), TierError)


@pytest.mark.parametrize("which", ["funding", "fear_greed", "klines"])
def test_recorded_data_that_is_not_a_regular_file_is_unavailable_saying_so(
    tmp_path: Path, which: str
) -> None:
    """A FIFO in place of a recording was reported "missing" (funding, Fear & Greed): it was
    there, and a person looking for the file was told it was not."""
    path = {
        "funding": funding_path("BTC/USDT", tmp_path),
        "fear_greed": fear_greed_path(tmp_path),
        "klines": kline_path("BTC/USDT", "5m", tmp_path),
    }[which]
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    loads: dict[str, Callable[[], object]] = {
        "funding": lambda: load_funding("BTC/USDT", tmp_path),
        "fear_greed": lambda: load_fear_greed(tmp_path),
        "klines": lambda: load_klines("BTC/USDT", "5m", tmp_path),
    }
    with pytest.raises(DataUnavailableError, match="is not a regular file"):
        loads[which]()
