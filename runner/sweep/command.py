"""``vigil sweep GRID.toml --out DIR [--scheduler tcp://host:8786] [--workers N]``: the CLI side."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from typing import Any

from runner.cli_text import path_argument, whole_number


def add_sweep_parser(sub: Any) -> None:
    sweep = sub.add_parser(
        "sweep", help="a grid of replays on Dask distributed, resumable, with an experiment report"
    )
    sweep.add_argument(
        "grid", type=path_argument, help="GRID.toml: periods, tickers, deciders, ..."
    )
    sweep.add_argument(
        "--out", type=path_argument, required=True, help="the sweep folder (resumed)"
    )
    sweep.add_argument(
        "--scheduler", help="a running Dask scheduler, e.g. tcp://host:8786 (default: local)"
    )
    sweep.add_argument(
        "--workers", type=_workers, help="local cluster workers, 1 to 128 (default: cores)"
    )


#: a local cluster is one machine and a Python process per worker: unbounded, --workers 100000
#: asked for that many processes. 128 is beyond one machine's useful count (a worker per core);
#: more is a remote cluster's (--scheduler)
MAX_LOCAL_WORKERS = 128

#: a local cluster of 0 or fewer workers never runs a task: the sweep would wait for ever
_workers = whole_number("workers", 1, MAX_LOCAL_WORKERS)


def run_sweep_command(args: argparse.Namespace, overrides: Mapping[str, Any]) -> int:
    from runner.logging_setup import configure_logging
    from runner.sweep.engine import run_sweep

    configure_logging("WARNING")
    return run_sweep(
        args.grid,
        args.out,
        overrides,
        scheduler=args.scheduler,
        workers=args.workers,
        stream=sys.stderr,
    )


__all__ = ["add_sweep_parser", "run_sweep_command"]
