"""``runner.cli``, the ``vigil`` command's entry module, imports nothing heavy: a replay's worker
processes are spawned, and a spawned child first imports its parent's main module (``python -m
runner.cli``, or the ``vigil`` script importing it). With the commands' imports in it, each of a
replay's three workers spent about a second of CPU importing pandas and aiohttp beside the replay.
Read in a fresh interpreter: this test process has imported them all already."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from runner.cli import EXIT_USAGE, main

REPO = Path(__file__).resolve().parents[2]

IMPORT_THEN_LIST = """
import sys
import runner.cli
heavy = {'pandas', 'numpy', 'aiohttp', 'pydantic', 'ccxt', 'anthropic', 'fastapi'}
print(sorted({name.split('.')[0] for name in sys.modules} & heavy), 'runner.commands' in sys.modules)
"""


def test_importing_the_entry_module_loads_no_command_and_no_heavy_library() -> None:
    done = subprocess.run(
        [sys.executable, "-c", IMPORT_THEN_LIST],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "[] False"


def test_the_entry_runs_the_commands_parser() -> None:
    with pytest.raises(SystemExit) as exited:  # argparse's usage error
        main(["no-such-command"])
    assert exited.value.code == EXIT_USAGE
