"""A journal writer killed (SIGKILL, by the rotation's failpoints) mid-rotation loses no line it
had acknowledged and never duplicates one, and the next open finishes the rotation.

The child appends numbered lines to a size-rotated ``decisions.jsonl`` (fsync on, like the daemon)
and prints each number once ``append`` returned; the armed failpoint kills it at its cut (the
compression cuts are on the gzip thread, so the line being written then may be in or not). The
parent then reads the journal across its segments, reopens it (as a restarted daemon would),
appends more, and reads again.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from core.clock import VirtualClock
from state.journal import JsonlJournal
from state.records import AgentFailureRecord, JournalReader
from state.rotation import JournalRotationConfig

EPOCH_MS = 1_740_009_600_000
CONFIG = JournalRotationConfig(rotate_daily=False, max_segment_bytes=400)

_CHILD = r"""
import sys
from pathlib import Path
from core.clock import VirtualClock
from core.failpoints import Failpoints
from state.journal import JsonlJournal
from state.rotation import JournalRotationConfig

live, point = Path(sys.argv[1]), sys.argv[2]
config = JournalRotationConfig(rotate_daily=False, max_segment_bytes=400)
journal = JsonlJournal(
    live, fsync=True, clock=VirtualClock(1_740_009_600_000), rotation=config,
    failpoint=Failpoints([point]).hit,
)
for n in range(200):
    journal.append({"type": "agent_failure", "at_ms": 1_740_009_600_000, "kind": "t", "detail": str(n)})
    print(n, flush=True)
    if point != "journal_mid_rotation":
        journal.wait_packed()  # the gzip thread reaches its cut before the next line
journal.close()
"""


def _numbers(live: Path) -> list[int]:
    found = []
    for record in JournalReader(live):
        assert isinstance(record, AgentFailureRecord)
        found.append(int(record.detail))
    return found


@pytest.mark.parametrize(
    "point", ["journal_mid_rotation", "journal_mid_compression", "journal_after_compression"]
)
def test_a_crash_mid_rotation_loses_and_repeats_no_line(tmp_path: Path, point: str) -> None:
    live = tmp_path / "logs" / "decisions.jsonl"
    child = subprocess.run(
        [sys.executable, "-c", _CHILD, str(live), point],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    acknowledged = [int(x) for x in child.stdout.split()]
    assert acknowledged, "the child died before its first line"
    names = sorted(p.name for p in live.parent.iterdir())
    if point == "journal_mid_rotation":
        assert "decisions.jsonl" not in names  # renamed; the new live file not made yet
    elif point == "journal_mid_compression":
        assert any(name.endswith(".jsonl.gz.tmp") for name in names)
    else:
        plain = {n for n in names if n.endswith("Z.jsonl")}
        assert {n + ".gz" for n in plain} <= set(names) and plain  # both copies on disk
    found = _numbers(live)
    assert found == list(range(len(found)))  # in order, none twice
    # every acknowledged line; at most one more: the gzip thread may kill the writer between a
    # line's write and its acknowledgement
    assert found[: len(acknowledged)] == acknowledged and len(found) - len(acknowledged) <= 1

    last = found[-1]
    with JsonlJournal(live, fsync=True, clock=VirtualClock(EPOCH_MS), rotation=CONFIG) as journal:
        for n in range(last + 1, last + 21):
            journal.append(
                {"type": "agent_failure", "at_ms": EPOCH_MS, "kind": "t", "detail": str(n)}
            )
    assert _numbers(live) == list(range(last + 21))
    left = sorted(p.name for p in live.parent.iterdir())
    assert not [n for n in left if n.endswith((".tmp", "Z.jsonl"))], left  # all finished
