"""A ``vigil`` command whose output's reader went away (``vigil status --json | head -1``,
``vigil config show | head``): Python ignores SIGPIPE, so the print raised BrokenPipeError and the
person saw a traceback for a pipe its reader was free to close. The command now ends quietly with
the exit code a shell gives a command killed by SIGPIPE."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from core.errors import EXIT_CLOSED_PIPE

REPO = Path(__file__).resolve().parents[2]


def test_a_closed_pipe_on_stdout_is_no_traceback(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # nobody reads: the command's first write meets EPIPE, whatever the timing
    try:
        done = subprocess.run(
            [sys.executable, "-m", "runner.cli", "--state-dir", str(tmp_path), "config", "show"],
            cwd=REPO,
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        os.close(write_end)
    assert done.stderr == ""
    assert done.returncode == EXIT_CLOSED_PIPE == 141
