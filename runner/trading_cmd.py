"""``vigil trading status|halt|resume``: a person's switch, acting on the state dir.

It edits only the ``trading`` field of ``runner_state.json``, exactly like a person with an editor
(the rest of the file is left byte for byte as parsed): a running daemon notices the edit within
``state.watch_interval_secs``, merges it and journals it; a stopped one starts in that state. The
write is ``state.merge_write``'s: a person's save landing between the read and the write was
overwritten by the state read before it; it is now read again and the switch set in it.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from core.regular_file import read_regular_file
from state.merge_write import MergeConflictError, merge_write
from state.models import InvalidStateFileError, RunnerState, parse_state_bytes, render_state
from state.state_file import STATE_FILE_MAX_BYTES
from state.trading import ACTIVE, HALTED, TradingState

EXIT_HALTED = 1
EXIT_BAD_STATE = 78


class _AlreadyActive(Exception):
    """``resume`` found trading active: nothing to write."""


def trading_command(state_path: Path, command: str, args: argparse.Namespace) -> int:
    try:
        if command == "status":
            state = _read(state_path)
            print(f"trading {state.trading.describe()}")
            return EXIT_HALTED if state.trading.halted else 0
        new = _switch(state_path, command, args)
    except _AlreadyActive:
        print("trading is already active")
        return 0
    except (OSError, InvalidStateFileError, MergeConflictError) as exc:
        print(f"vigil trading: cannot use {state_path}: {exc}", file=sys.stderr)
        return EXIT_BAD_STATE
    print(
        f"trading {new.describe()} (written to {state_path}; a running daemon applies it "
        "within its state watch interval)"
    )
    return 0


def _switch(state_path: Path, command: str, args: argparse.Namespace) -> TradingState:
    now_ms = int(time.time() * 1000)  # a person's action: wall time, whatever the daemon's clock
    if command == "halt":
        new = TradingState(mode=HALTED, reason=args.reason, since_ms=now_ms, by="cli")
    else:
        new = TradingState(mode=ACTIVE, since_ms=now_ms, by="cli")

    def edit(data: bytes | None) -> bytes:
        state = RunnerState() if data is None else parse_state_bytes(data)[0]
        if command != "halt" and not state.trading.halted:
            raise _AlreadyActive
        return render_state(state.model_copy(update={"trading": new}))

    state_path.parent.mkdir(parents=True, exist_ok=True)
    merge_write(state_path, edit, max_bytes=STATE_FILE_MAX_BYTES)
    return new


def _read(path: Path) -> RunnerState:
    try:
        # a FIFO there blocked read_bytes: the command hung; a sparse file of gigabytes was read
        _, data = read_regular_file(path, max_bytes=STATE_FILE_MAX_BYTES)
    except FileNotFoundError:
        return RunnerState()
    state, _ = parse_state_bytes(data)
    return state
