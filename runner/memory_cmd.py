"""``vigil memory notes history`` and ``vigil memory notes rollback N``: the agent's memory note,
version by version, and a person's way back to one of them. The trading memory graph's commands
(list, search, show, add, forget, export, import, stats) are in ``runner.memory_graph_cmd``.

Works on ``runner_state.json`` like any person's edit: with the daemon running, it notices the
changed note, merges it and keeps it as a version written by a person. A note is a model's words
or a person's edit, so it is printed with its control characters escaped (``\\x1b``, ``\\n``): one
line, never a terminal's command.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime

from core.clock import WallClock
from core.redact import Redactor
from runner.config import Settings
from runner.memory_graph_cmd import run_graph_command
from runner.memory_parser import GRAPH_COMMANDS
from state.line_text import as_one_line
from state.store import RunnerStateStore


def run_memory(args: argparse.Namespace, settings: Settings) -> int:
    if args.memory_command in GRAPH_COMMANDS:
        return run_graph_command(args, settings)
    store = RunnerStateStore(
        settings.runner_state_path, WallClock(), Redactor(settings.secret_values())
    )
    store.load()
    if args.notes_command == "history":
        for v in store.memory_history():
            at = datetime.fromtimestamp(v.at_ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
            extra = "".join(
                [
                    f", {v.redactions} redacted" if v.redactions else "",
                    f", {v.note}" if v.note else "",
                ]
            )
            print(f"{v.version:>4}  {at}  {v.author}{extra}\n      {as_one_line(v.text)}")
        print(f"current: {as_one_line(store.current.agent_memory)}")
        return 0
    try:
        restored = store.rollback_memory(args.version)
    except KeyError as exc:
        print(f"vigil: {exc.args[0]}", file=sys.stderr)
        return 2
    store.save()
    print(f"restored version {args.version}: {as_one_line(restored)}")
    return 0


__all__ = ["run_memory"]
