"""``vigil prompt`` run in a fresh interpreter, with that interpreter's peak resident size (VmHWM:
what it held, whatever the machine's speed), for the tests that bound what the prompt reads."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass

from fakes.daemon import REPO

_SCRIPT = """
import json
from pathlib import Path
from runner.cli import main
code = main(["prompt"])
hwm = next(l for l in Path("/proc/self/status").read_text().splitlines() if l.startswith("VmHWM"))
print(json.dumps({"code": code, "peak_kib": int(hwm.split()[1])}))
"""


@dataclass(frozen=True)
class PromptRun:
    request: str  # what ``vigil prompt`` printed: the request it would send
    code: int  # its exit code
    peak_kib: int
    stderr: str


def prompt_with_peak(env: dict[str, str]) -> PromptRun:
    """``vigil prompt`` in ``env``; a child that fails before printing its outcome fails the
    test with its stderr."""
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    *request, outcome = done.stdout.strip().splitlines()
    result = json.loads(outcome)
    return PromptRun("\n".join(request), result["code"], result["peak_kib"], done.stderr)
