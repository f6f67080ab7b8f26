"""A runner_state.json far larger than any state (a sparse file of gigabytes, a log written there
by mistake) while the daemon runs: the store's poll read it whole, judged it and kept it whole (to
copy it aside at the next save). It is now refused unread past the bound, said once, the last good
state kept, and at the next save moved aside whole (nothing read, nothing lost)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from fakes.allocation_peak import allocation_peak
from state_store_support import EPOCH_MS, files_in, loaded_store, on_disk, state_path

from core.clock import VirtualClock
from core.errors import RefuseToStartError
from runner.cli import main
from runner.trading_cmd import EXIT_BAD_STATE
from state.state_file import STATE_FILE_MAX_BYTES
from state.store import RunnerStateStore

HUGE = 256 << 20  # sparse: no disk, but read whole it is 256 MB of memory (and more, decoded)


def _make_huge(path: Path) -> None:
    with path.open("r+b") as handle:
        handle.truncate(HUGE)


def test_a_huge_state_file_is_said_once_and_moved_aside_whole(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = VirtualClock(epoch_ms=EPOCH_MS)
    path = state_path(tmp_path)
    store = loaded_store(path, clock)
    good = store.current
    _make_huge(path)
    with caplog.at_level(logging.WARNING, logger="state.store"):
        with allocation_peak() as allocated:
            report = store.poll()
        assert store.poll() is None  # said once
    assert allocated.peak_bytes < 2 * STATE_FILE_MAX_BYTES < HUGE
    assert report is not None and not report.accepted
    assert report.error is not None and f"over the {STATE_FILE_MAX_BYTES:,}" in report.error
    assert store.current == good
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == [caplog.records[0]]
    reports = store.save()
    (aside,) = [p for p in path.parent.iterdir() if ".rejected-" in p.name]
    assert aside.stat().st_size == HUGE  # the file as it was, moved
    assert [r.preserved_as for r in reports] == [aside]
    assert on_disk(path)["entry_prices"] == {"BTC/USDT": 97000.0}
    assert files_in(path.parent) == sorted(["runner_state.json", aside.name])


def test_a_huge_state_file_refuses_the_start_unread(tmp_path: Path) -> None:
    path = state_path(tmp_path)
    path.parent.mkdir()
    path.touch()
    _make_huge(path)
    with (
        allocation_peak() as allocated,
        pytest.raises(RefuseToStartError, match=f"over the {STATE_FILE_MAX_BYTES:,}"),
    ):
        RunnerStateStore(path, VirtualClock(epoch_ms=EPOCH_MS)).load()
    assert allocated.peak_bytes < 2 * STATE_FILE_MAX_BYTES
    assert path.stat().st_size == HUGE


@pytest.mark.parametrize("command", ["status", "halt", "resume"])
def test_vigil_trading_refuses_a_huge_state_file_unread(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    path = tmp_path / "runner_state.json"
    path.touch()
    _make_huge(path)
    argv = ["--state-dir", str(tmp_path), "trading", command]
    with allocation_peak() as allocated:
        code = main([*argv, "--reason", "audit"] if command == "halt" else argv)
    assert code == EXIT_BAD_STATE
    assert f"over the {STATE_FILE_MAX_BYTES:,}" in capsys.readouterr().err
    assert allocated.peak_bytes < 2 * STATE_FILE_MAX_BYTES
    assert path.stat().st_size == HUGE
