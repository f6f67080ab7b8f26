"""A runner_state.json whose ``extra`` is nested a few hundred deep (under json's own limit of
about a thousand): the model's check of ``extra`` recursed past the stack and its RecursionError
escaped every reader: the store's poll (the edit neither rejected nor kept aside, and each save
of a decision failed with it), the start (a traceback, not exit 78), ``vigil trading``."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from state_store_support import EPOCH_MS, loaded_store, state_path

from core.clock import VirtualClock
from core.errors import RefuseToStartError
from runner.cli import main
from runner.trading_cmd import EXIT_BAD_STATE
from state.models import InvalidStateFileError, parse_state_bytes
from state.store import RunnerStateStore


def _deep(depth: int) -> bytes:
    return ('{"extra": {"x": ' + "[" * depth + "]" * depth + "}}\n").encode()


@pytest.mark.parametrize("depth", [500, 900, 990])
def test_a_deep_extra_is_an_invalid_state(depth: int) -> None:
    with pytest.raises(InvalidStateFileError, match="nested"):
        parse_state_bytes(_deep(depth))


def test_a_deep_extra_edited_in_is_rejected_and_kept_aside(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = state_path(tmp_path)
    store = loaded_store(path, VirtualClock(epoch_ms=EPOCH_MS))
    good = store.current
    path.write_bytes(_deep(500))
    with caplog.at_level(logging.ERROR, logger="state.store"):
        report = store.poll()
    assert report is not None and not report.accepted and "nested" in (report.error or "")
    assert store.current == good
    (kept,) = [r.preserved_as for r in store.save() if r.preserved_as is not None]
    assert kept is not None and kept.read_bytes() == _deep(500)


def test_a_deep_extra_refuses_the_start_and_vigil_trading(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "runner_state.json"
    path.write_bytes(_deep(500))
    with pytest.raises(RefuseToStartError, match="nested"):
        RunnerStateStore(path, VirtualClock(epoch_ms=EPOCH_MS)).load()
    assert main(["--state-dir", str(tmp_path), "trading", "status"]) == EXIT_BAD_STATE
    assert "nested" in capsys.readouterr().err
