"""What a person or a mistake leaves in the ``trading`` field of ``runner_state.json``."""

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


def test_vigil_trading_status_prints_a_reason_from_the_file_with_its_escapes(
    tmp_path: Path, capsys: Any
) -> None:
    """A reason or ``by`` already in the file (written by hand while the daemon was stopped, or
    before the one-line rule) is loaded as it is; `vigil trading status` printed it raw, and its
    ESC [2J, CSI or OSC drove the terminal (the daemon's log line of it too)."""
    trading = {
        "mode": "halted",
        "reason": "audit\x1b[2J\x9b31m\u2028done",
        "since_ms": T0_MS,
        "by": "me\x1b]0;title\x07",
    }
    (tmp_path / "runner_state.json").write_text(json.dumps({"trading": trading}))
    assert main(["--state-dir", str(tmp_path), "trading", "status"]) == 1
    out = capsys.readouterr().out
    assert not [ch for ch in out if (ch < " " and ch != "\n") or "\x7f" <= ch <= "\x9f"]
    assert "by me\\x1b]0;title\\x07: audit\\x1b[2J\\x9b31m\\u2028done" in out
