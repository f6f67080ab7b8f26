"""The ``vigil`` command's entry point (``vigil = runner.cli:main``, ``python -m runner.cli``).

It imports nothing heavy, on purpose: a replay's worker processes (its ticks ahead, the analysts'
desk, regime fits) are spawned, and a spawned child first imports its parent's main module, this
one. With the parser and every command's imports here, each child spent about a second of CPU
importing pandas, aiohttp and the memory commands it never uses, beside the replay on a 2-core
host. The parser and the commands are ``runner.commands``.
"""

from __future__ import annotations

from collections.abc import Sequence

from core.errors import EXIT_UNHEALTHY, EXIT_USAGE


def main(argv: Sequence[str] | None = None) -> int:
    from runner.commands import main as run_command

    return run_command(argv)


__all__ = ["EXIT_UNHEALTHY", "EXIT_USAGE", "main"]

if __name__ == "__main__":
    raise SystemExit(main())
