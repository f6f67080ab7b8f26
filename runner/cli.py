"""The ``vigil`` command's entry point (``vigil = runner.cli:main``, ``python -m runner.cli``).

It imports nothing heavy, on purpose: a replay's worker processes (its ticks ahead, the analysts'
desk, regime fits) are spawned, and a spawned child first imports its parent's main module, this
one. With the parser and every command's imports here, each child spent about a second of CPU
importing pandas, aiohttp and the memory commands it never uses, beside the replay on a 2-core
host. The parser and the commands are ``runner.commands``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from core.errors import EXIT_CLOSED_PIPE, EXIT_UNHEALTHY, EXIT_USAGE


def main(argv: Sequence[str] | None = None) -> int:
    from runner.commands import main as run_command

    try:
        return run_command(argv)
    except BrokenPipeError:
        # the output's reader went away (`vigil status --json | head -1`), free to do so: no
        # traceback, and nothing more written there (the flush at exit would raise again)
        _quiet_output()
        return EXIT_CLOSED_PIPE


def _quiet_output() -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        os.dup2(devnull, stream.fileno())
    os.close(devnull)


__all__ = ["EXIT_CLOSED_PIPE", "EXIT_UNHEALTHY", "EXIT_USAGE", "main"]

if __name__ == "__main__":
    raise SystemExit(main())
