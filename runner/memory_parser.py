"""``vigil memory``'s arguments, apart from the commands: every ``vigil`` command builds the whole
parser (the Docker health check every 30 s among them), and the commands open the memory store
and its embedder (numpy, aiohttp)."""

from __future__ import annotations

from typing import Any, get_args

from memory.config import InsightKind
from runner.cli_text import (
    REGIME_NAMES,
    finite_number,
    path_argument,
    regime_name,
    usdt_ticker,
    utf8_text,
    whole_number,
)


def add_memory_parser(sub: Any) -> None:
    memory = sub.add_parser("memory", help="the agent's memory")
    memory_sub = memory.add_subparsers(dest="memory_command", required=True)
    notes = memory_sub.add_parser("notes", help="the memory note Claude keeps (agent_memory)")
    notes_sub = notes.add_subparsers(dest="notes_command", required=True)
    notes_sub.add_parser("history", help="the last 20 versions, with who wrote each")
    rollback = notes_sub.add_parser("rollback", help="restore version N as the current note")
    rollback.add_argument("version", type=int, help="a version number from `history`")
    add_graph_commands(memory_sub)  # the trading memory graph: list, search, add, ...


def add_graph_commands(cmd: Any) -> None:
    """The trading-memory subcommands, beside ``notes`` under ``vigil memory``."""
    listing = cmd.add_parser("list", help="insights, newest first")
    search = cmd.add_parser("search", help="insights most similar to a text")
    search.add_argument("text", type=utf8_text)
    for p in (listing, search):
        p.add_argument("--ticker", type=usdt_ticker)
        p.add_argument("--regime", type=regime_name, help=_REGIME_HELP)
        p.add_argument("--limit", type=_limit, default=20, help=f"1 to {LIMIT_MAX:,}")
    listing.add_argument("--all", action="store_true", help="rolled-up (archived) ones too")
    listing.add_argument("--kind", choices=get_args(InsightKind), help="one kind only")
    cmd.add_parser("show", help="one insight or trade as JSON").add_argument("id", type=utf8_text)
    add = cmd.add_parser("add", help="a person's insight (salience 1)")
    add.add_argument("text", type=utf8_text)
    add.add_argument("--ticker", type=usdt_ticker)
    add.add_argument("--regime", type=regime_name, help=_REGIME_HELP)
    add.add_argument("--ttl-days", type=_ttl_days, help="days it is used for (default: [memory])")
    cmd.add_parser("forget", help="delete one insight or trade").add_argument("id", type=utf8_text)
    export = cmd.add_parser("export", help="everything, to stdout")
    export.add_argument("--format", choices=("jsonl", "cypher"), default="jsonl")
    cmd.add_parser("import", help="a jsonl export (idempotent)").add_argument(
        "file", type=path_argument
    )
    cmd.add_parser("stats", help="node counts and per-regime trade statistics")


_REGIME_HELP = f"the crypto regime: {', '.join(REGIME_NAMES)}"

#: the most rows ``list`` and ``search`` show (SQLite takes a negative LIMIT as none at all)
LIMIT_MAX = 100_000


#: unchecked, -1 listed everything and a number past 2**63 was a traceback from SQLite
_limit = whole_number("rows", 1, LIMIT_MAX)

#: unchecked, nan kept an insight for ever (no age is over nan) and 0 or less made it expired at
#: once, never retrieved; both without a word
_ttl_days = finite_number("days", 0.0, low_allowed=False)


GRAPH_COMMANDS = ("list", "search", "show", "add", "forget", "export", "import", "stats")


__all__ = ["GRAPH_COMMANDS", "LIMIT_MAX", "add_memory_parser"]
