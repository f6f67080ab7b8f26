"""A ``trading.since_ms`` no calendar holds (a hand edit, a unit slip) in ``runner_state.json``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from broker.trading_state import TradingSwitch
from core.clock import VirtualClock
from runner.cli import main
from state.store import RunnerStateStore
from state.trading import TradingState

T0_MS = 1_740_787_200_000
#: year 10000 and past it: ``datetime`` cannot hold them
BEYOND_ANY_DATE = (253_402_300_800_000, 10**17, 2**63)


@pytest.mark.parametrize("since_ms", BEYOND_ANY_DATE)
def test_a_halt_dated_past_any_calendar_is_described_not_raised(since_ms: int) -> None:
    described = TradingState(mode="halted", reason="audit", since_ms=since_ms).describe()
    assert described.startswith("HALTED") and "audit" in described
    assert str(since_ms) in described


@pytest.mark.parametrize("since_ms", BEYOND_ANY_DATE)
def test_vigil_trading_status_and_the_daemon_take_an_edit_dated_past_any_calendar(
    tmp_path: Path, capsys: Any, since_ms: int
) -> None:
    """Before, ``describe`` raised ``ValueError: year ... is out of range``: `vigil trading
    status` ended in a traceback, and so did the daemon's journaling of the edit after each poll
    and a start with that state in the file."""
    clock = VirtualClock(T0_MS)
    path = tmp_path / "runner_state.json"
    store = RunnerStateStore(path, clock)
    store.load()
    lines: list[Any] = []
    switch = TradingSwitch(clock, store, lines.append)
    edited = json.loads(path.read_text()) if path.exists() else {}
    edited["trading"] = {"mode": "halted", "reason": "audit", "since_ms": since_ms, "by": "me"}
    path.write_text(json.dumps(edited))

    store.poll()
    switch.observe()
    assert switch.halted and lines[-1]["since_ms"] == since_ms
    assert main(["--state-dir", str(tmp_path), "trading", "status"]) == 1
    assert "HALTED" in capsys.readouterr().out
    restarted = RunnerStateStore(path, clock)
    restarted.load()
    assert TradingSwitch(clock, restarted, lines.append).halted
