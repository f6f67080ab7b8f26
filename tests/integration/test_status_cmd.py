"""``vigil status``: one screen from the daemon's API when it serves (real uvicorn on loopback, the
token from the environment), else from the state dir; exit code 1 when unhealthy."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest
from fakes.api_support import T0_MS, TOKEN, decision_line, serve_api, write_state_dir
from fakes.fifo import outcome_beside_fifo
from fakes.heartbeat import write_beat

from api.files import StateDirFiles
from api.models import AccountBody, AgentBody, GateBody, LoopBody, StreamBody, TradingBody
from api.server import ENDPOINT_FILE_NAME
from runner.cli import main
from runner.config import Settings
from runner.status_cmd import NEEDS_DAEMON, collect
from state.models import RunnerState, render_state
from state.trading import TradingState

HOUR_MS = 3_600_000


def _state_dir(tmp_path: Path, *, heartbeat_age_secs: float | None = 1.0) -> Path:
    state_dir = tmp_path / "state-dir"
    write_state_dir(state_dir, decisions=0)
    with (state_dir / "logs" / "decisions.jsonl").open("ab") as out:
        out.write(decision_line(0, T0_MS - HOUR_MS, 9_900.0))  # yesterday
        out.write(decision_line(1, T0_MS + HOUR_MS, 10_000.0))  # today's first: the baseline
        out.write(decision_line(2, T0_MS + 2 * HOUR_MS, 10_020.0))
    halted = TradingState(mode="halted", reason="manual check", since_ms=T0_MS, by="cli")
    (state_dir / "runner_state.json").write_bytes(render_state(RunnerState(trading=halted)))
    if heartbeat_age_secs is not None:
        write_beat(state_dir / "heartbeat", age_secs=heartbeat_age_secs)
    return state_dir


def test_from_the_state_dir_with_a_fresh_heartbeat(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state_dir = _state_dir(tmp_path)
    assert main(["--state-dir", str(state_dir), "status"]) == 0
    screen = capsys.readouterr().out
    # the paper account: 9,160 cash + 0.4 ETH marked at 2,200 = 10,040; today began at 10,000
    for expected in (
        f"vigil status from the state dir {state_dir}",
        "health      healthy",
        "trading     halted (manual check)",
        "equity      $10,040.00  (cash $9,160.00)",
        "PnL today   +$40.00 (+0.40 %) since 01:00 UTC",
        "breaker     n/a    budget left today n/a",
        "positions   1",
        "ETH/USDT   qty 0.4  entry 2,100.00  mark 2,200.00  PnL +$40.00 (+4.76 %)",
        "last        2025-03-01 02:00 UTC by fallback (no_api_key) on agent_timer",
        f"breaker: {NEEDS_DAEMON}",
    ):
        assert expected in screen, (expected, screen)
    assert len(screen.splitlines()) <= 24  # one screen


def test_a_stale_heartbeat_exits_non_zero_with_the_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state_dir = _state_dir(tmp_path, heartbeat_age_secs=3600)
    assert main(["--state-dir", str(state_dir), "status", "--json"]) == 1
    view = json.loads(capsys.readouterr().out)
    assert view["healthy"] is False and "heartbeat is stale" in view["health"][0]
    assert view["source"] == "state_dir"
    assert main(["--state-dir", str(tmp_path / "none"), "status"]) == 1  # no heartbeat at all


class _Daemon:
    """What the API reads of a running daemon (``api.ports.LiveDaemon``), fixed figures."""

    def __init__(self, state_dir: Path) -> None:
        self._files = StateDirFiles(state_dir)

    def now_ms(self) -> int:
        return T0_MS + 3 * HOUR_MS

    def loops(self) -> list[LoopBody]:
        return [LoopBody(name="market", state="running", restarts=0)]

    def streams(self) -> list[StreamBody]:
        return []

    def agent(self) -> AgentBody:
        return AgentBody(
            enabled=True, breaker="closed", budget_limit_usd=5.0, budget_left_today_usd=3.25,
            budget_exhausted=False, calls=4, failed_calls=0, input_tokens=1, output_tokens=1,
            cost_total_usd=1.75, cost_today_usd=1.75,
        )  # fmt: skip

    def gate(self) -> GateBody:
        return GateBody(
            evaluations=1, passes=1, passes_by_layer={}, last_pass_at_ms=None, last_wake_reasons=[]
        )

    async def account(self) -> AccountBody:
        return self._files.paper_account()

    def counts(self) -> object:
        raise NotImplementedError("not read by /api/status")

    def poll_state(self) -> None:
        return None


class _Trading:
    def trading(self) -> TradingBody:
        return TradingBody(state="active")


async def test_from_the_daemons_api_with_the_token_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state_dir = _state_dir(tmp_path)
    monkeypatch.setenv("VIGIL_API_TOKEN", TOKEN)
    settings = Settings(state_dir=state_dir)
    async with serve_api(state_dir, daemon=_Daemon(state_dir), trading=_Trading()) as api:  # type: ignore[arg-type]
        assert (state_dir / ENDPOINT_FILE_NAME).is_file()
        view = await asyncio.to_thread(collect, settings)
    assert (view.source, view.where) == ("api", api.url.rstrip("/"))
    assert view.now_ms == T0_MS + 3 * HOUR_MS  # the daemon's clock, not the files'
    assert (view.breaker, view.budget_left_today_usd, view.budget_limit_usd) == (
        "closed",
        3.25,
        5.0,
    )
    assert view.trading.state == "active"  # the daemon's switch, not the file's
    assert (view.pnl_today_usd, view.pnl_today_since_ms) == (40.0, T0_MS + HOUR_MS)
    assert view.account.equity_usd == 10_040.0 and view.healthy
    assert "breaker" not in view.unavailable and "api" not in view.unavailable


async def test_a_wrong_token_falls_back_to_the_files_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state_dir = _state_dir(tmp_path)
    monkeypatch.setenv("VIGIL_API_TOKEN", "not-the-token")
    async with serve_api(state_dir):
        view = await asyncio.to_thread(collect, Settings(state_dir=state_dir))
    assert view.source == "state_dir"
    assert "HTTP 401" in view.unavailable["api"]
    assert view.trading.state == "halted" and view.pnl_today_usd == 40.0


def test_a_state_dir_that_is_a_file_is_exit_78_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It was a NotADirectoryError traceback from the first file read under it."""
    not_a_dir = tmp_path / "state"
    not_a_dir.write_text("a file")
    assert main(["--state-dir", str(not_a_dir), "status"]) == 78
    assert f"the state dir {not_a_dir} is not a directory" in capsys.readouterr().err


def test_a_fifo_in_place_of_the_state_file_is_reported_not_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A FIFO blocked the status command's read of runner_state.json until someone wrote to it."""
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    fifo = state_dir / "runner_state.json"
    os.mkfifo(fifo)
    code = outcome_beside_fifo(lambda: main(["--state-dir", str(state_dir), "status"]), fifo)
    assert code == 1  # no heartbeat: unhealthy, and the trading state unavailable with why
    assert "not a regular file" in capsys.readouterr().out


def test_a_reason_from_the_state_file_is_printed_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A halt reason already in runner_state.json is loaded as it is (the one-line rule judges
    edits); `vigil status` printed its ESC, CSI and BEL raw, so it could clear or colour the
    terminal of whoever looked."""
    state_dir = _state_dir(tmp_path)
    halted = TradingState(mode="halted", reason="check\x1b[2J\x9b31m\x07 it", since_ms=T0_MS)
    (state_dir / "runner_state.json").write_bytes(render_state(RunnerState(trading=halted)))
    main(["--state-dir", str(state_dir), "status"])
    screen = capsys.readouterr().out
    assert not any(ch in screen for ch in "\x1b\x9b\x07"), repr(screen)
    assert "trading     halted (check\\x1b[2J\\x9b31m\\x07 it)" in screen
