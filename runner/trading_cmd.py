"""``vigil trading status|halt|resume``: a person's switch, acting on the state dir.

It edits only the ``trading`` field of ``runner_state.json``, exactly like a person with an editor
(the rest of the file is left byte for byte as parsed): a running daemon notices the edit within
``state.watch_interval_secs``, merges it and journals it; a stopped one starts in that state.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from state.atomic import atomic_write_bytes
from state.models import InvalidStateFileError, RunnerState, parse_state_bytes, render_state
from state.regular_file import read_regular_file
from state.trading import ACTIVE, HALTED, TradingState

EXIT_HALTED = 1
EXIT_BAD_STATE = 78


def trading_command(state_path: Path, command: str, args: argparse.Namespace) -> int:
    try:
        state = _read(state_path)
    except (OSError, InvalidStateFileError) as exc:
        print(f"vigil trading: cannot use {state_path}: {exc}", file=sys.stderr)
        return EXIT_BAD_STATE
    if command == "status":
        print(f"trading {state.trading.describe()}")
        return EXIT_HALTED if state.trading.halted else 0
    now_ms = int(time.time() * 1000)  # a person's action: wall time, whatever the daemon's clock
    if command == "halt":
        new = TradingState(mode=HALTED, reason=args.reason, since_ms=now_ms, by="cli")
    else:
        if not state.trading.halted:
            print("trading is already active")
            return 0
        new = TradingState(mode=ACTIVE, since_ms=now_ms, by="cli")
    edited = state.model_copy(update={"trading": new})
    atomic_write_bytes(state_path, render_state(edited))
    print(
        f"trading {new.describe()} (written to {state_path}; a running daemon applies it "
        "within its state watch interval)"
    )
    return 0


def _read(path: Path) -> RunnerState:
    try:
        _, data = read_regular_file(path)  # a FIFO there blocked read_bytes: the command hung
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        return RunnerState()
    state, _ = parse_state_bytes(data)
    return state
