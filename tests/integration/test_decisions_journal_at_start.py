"""Something other than a regular file at ``logs/decisions.jsonl`` refuses the start naming it,
as ``trades.csv`` and the outboxes do. A FIFO was opened for appending: the daemon started, and
its first lines filled the pipe's buffer and then blocked the journal's write for good; a folder
was a traceback from the journal's torn-tail repair."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from fakes.daemon import daemon_env, refused_sim_start

from core.errors import RefuseToStartError
from runner.app import build_daemon
from runner.config import MarketConfig, Settings

pytestmark = pytest.mark.timeout(120)

CASES: dict[str, Callable[[Path], None]] = {
    "fifo": os.mkfifo,
    "folder": Path.mkdir,
}


def _state_dir(tmp_path: Path, case: str) -> Path:
    state_dir = tmp_path / "state"
    (state_dir / "logs").mkdir(parents=True)
    CASES[case](state_dir / "logs" / "decisions.jsonl")
    return state_dir


@pytest.mark.parametrize("case", list(CASES))
async def test_a_decisions_journal_that_is_not_a_file_refuses_the_start(
    tmp_path: Path, case: str
) -> None:
    state_dir = _state_dir(tmp_path, case)
    settings = Settings(state_dir=state_dir, market=MarketConfig(source="sim"))
    with pytest.raises(RefuseToStartError) as refused:
        await build_daemon(settings)
    message = str(refused.value)
    assert str(state_dir / "logs" / "decisions.jsonl") in message
    assert "not a regular file" in message


def test_the_daemon_refuses_a_fifo_journal_with_exit_78_and_no_traceback(tmp_path: Path) -> None:
    stderr = refused_sim_start(daemon_env(_state_dir(tmp_path, "fifo")))
    assert "not a regular file" in stderr
