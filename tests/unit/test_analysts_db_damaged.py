"""A damaged ``analysts.db`` (a crash on a disk that lies about fsync, another file copied over it)
no longer stops the daemon's start with a traceback: the daemon decides without the analysts'
reports, says so, and leaves the file as it found it. Those reports are the analysts' own reading
of the market, written again from it; a person's memory (memory.db) is handled as before."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest

from core.clock import VirtualClock
from memory.analyst_store import AnalystStore
from memory.port import StoreUnavailableError
from runner.agent_wiring import Agents
from runner.config import Settings
from runner.context_wiring import build_decision_context

MARCH_1 = 1_740_787_200_000
DAMAGED = b"this is not a database file " * 64


def test_the_store_refuses_a_damaged_file_as_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "analysts.db"
    path.write_bytes(DAMAGED)
    with pytest.raises(StoreUnavailableError, match="file is not a database"):
        AnalystStore(path)
    assert path.read_bytes() == DAMAGED


def test_the_daemon_builds_its_context_without_the_analysts_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / "analysts.db").write_bytes(DAMAGED)
    agents = Agents(decider=cast(Any, None), reviewer=None, client=None)  # no key: no summariser
    context = build_decision_context(
        Settings(state_dir=state),
        VirtualClock(MARCH_1),
        agents,
        memory=True,
        person_notes=lambda: "",
    )
    assert context is not None
    assert "analysts.db: file is not a database" in caplog.text
    assert "deciding without the analysts' reports" in caplog.text
    assert (state / "analysts.db").read_bytes() == DAMAGED
