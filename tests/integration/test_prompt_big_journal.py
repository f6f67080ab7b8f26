"""``vigil prompt`` finds the latest snapshot of a journal of any size holding one line at a
time: it read the whole segment into memory and split it into lines (two copies: a journal with
rotation off, months long, took gigabytes). Measured in a fresh interpreter by its peak resident
size (VmHWM), which depends on what is held, not on the machine's speed."""

from __future__ import annotations

from pathlib import Path

import orjson
from fakes.claude_support import snapshot
from fakes.daemon import daemon_env
from fakes.prompt_peak import prompt_with_peak

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
    run = prompt_with_peak(daemon_env(state_dir, VIGIL_CONTEXT__ENABLED="false"))
    assert run.code == 0 and "snapshot of decision d-big" in run.stderr
    assert "the one" in run.request
    assert run.peak_kib < PEAK_MIB * 1024, f"peak {run.peak_kib // 1024} MiB"
