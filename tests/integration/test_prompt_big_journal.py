"""``vigil prompt`` finds the latest snapshot of a journal of any size holding one line at a
time: it read the whole segment into memory and split it into lines (two copies: a journal with
rotation off, months long, took gigabytes). Measured in a fresh interpreter by its peak resident
size (VmHWM), which depends on what is held, not on the machine's speed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import orjson
from fakes.claude_support import snapshot
from fakes.daemon import REPO, daemon_env

_PROMPT = """
import json, sys
from pathlib import Path
from runner.cli import main
code = main(["prompt"])
hwm = next(l for l in Path("/proc/self/status").read_text().splitlines() if l.startswith("VmHWM"))
print(json.dumps({"code": code, "peak_kib": int(hwm.split()[1])}))
"""
PAD_LINES = 60_000
PAD_BYTES = 4096  # 240 MiB of review lines after the decision
PEAK_MIB = 200  # 240 MiB held twice before


def test_the_latest_snapshot_of_a_big_journal_is_found_one_line_at_a_time(
    tmp_path: Path,
) -> None:
    state_dir = tmp_path / "state"
    (state_dir / "logs").mkdir(parents=True)
    snap = snapshot(memory="the one")
    decision = {
        "type": "decision",
        "decision_id": "d-big",
        "at_ms": snap.at_ms,
        "trigger": ["t"],
        "snapshot": snap.model_dump(mode="json"),
    }
    review = orjson.dumps({"type": "review", "at_ms": snap.at_ms, "pad": "x" * PAD_BYTES})
    with (state_dir / "logs" / "decisions.jsonl").open("wb") as out:
        out.write(orjson.dumps(decision) + b"\n")
        for _ in range(PAD_LINES):
            out.write(review + b"\n")
    done = subprocess.run(
        [sys.executable, "-c", _PROMPT],
        env=daemon_env(state_dir, VIGIL_CONTEXT__ENABLED="false"),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    *request, outcome = done.stdout.strip().splitlines()
    result = json.loads(outcome)
    assert result["code"] == 0 and "snapshot of decision d-big" in done.stderr
    assert "the one" in "\n".join(request)
    assert result["peak_kib"] < PEAK_MIB * 1024, f"peak {result['peak_kib'] // 1024} MiB"
