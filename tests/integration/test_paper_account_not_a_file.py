"""A FIFO or a sparse file of gigabytes at paper_broker.json. It was read with a plain
``read_bytes``: the FIFO hung the daemon's start, ``vigil status`` and the API's status and
positions on its event loop (every route and /healthz froze with it) until someone wrote to it,
and the sparse file was read whole. The start is refused naming the file (exit 78, as for a
damaged one), and status and the API say the account is unavailable and why."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fakes.api_support import serve_api, write_state_dir
from fakes.fifo import outcome_beside_fifo, released_fifo

from broker.paper import PaperBroker
from core.clock import VirtualClock
from core.errors import RefuseToStartError
from runner.cli import main


def _fifo_at_account(tmp_path: Path) -> tuple[Path, Path]:
    state_dir = tmp_path / "state"
    write_state_dir(state_dir)
    account = state_dir / "paper_broker.json"
    account.unlink()
    os.mkfifo(account)
    return state_dir, account


def test_the_paper_broker_refuses_to_start_on_a_fifo(tmp_path: Path) -> None:
    _, account = _fifo_at_account(tmp_path)
    got = outcome_beside_fifo(lambda: PaperBroker(VirtualClock(), state_path=account), account)
    assert isinstance(got, RefuseToStartError), got
    assert f"{account} is not a regular file (a FIFO)" in str(got)
    assert account.is_fifo()


def test_the_paper_broker_refuses_a_file_of_gigabytes_unread(tmp_path: Path) -> None:
    account = tmp_path / "paper_broker.json"
    account.write_text("{}")
    os.truncate(account, 2 << 30)
    with pytest.raises(RefuseToStartError, match="over the"):
        PaperBroker(VirtualClock(), state_path=account)


def test_vigil_status_says_the_account_is_unavailable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state_dir, account = _fifo_at_account(tmp_path)
    outcome_beside_fifo(lambda: main(["--state-dir", str(state_dir), "status"]), account)
    assert "not a regular file (a FIFO)" in capsys.readouterr().out


async def test_the_api_says_the_account_is_unavailable_and_does_not_freeze(
    tmp_path: Path,
) -> None:
    state_dir, account = _fifo_at_account(tmp_path)
    with released_fifo(account) as released:
        async with serve_api(state_dir) as api:
            code, status = await api.get("/api/status")
            _, positions = await api.get("/api/positions")
    assert not released(), "the API blocked on the FIFO"
    assert code == 200 and isinstance(status, dict) and isinstance(positions, dict)
    assert "(a FIFO)" in status["unavailable"]["equity_usd"]
    assert "(a FIFO)" in positions["unavailable"]["account"]
