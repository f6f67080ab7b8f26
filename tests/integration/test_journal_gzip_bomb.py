"""A gzip bomb as the newest rotated segment of ``decisions.jsonl`` (a few hundred kB that inflate
to hundreds of MiB of two-byte lines): the simulator's resume and the cost projection
(``state.segments.recent_lines``) listed every line of a gzipped segment, about 40 bytes of
memory per inflated byte, and a daemon's start exhausted memory. A gzipped segment is now read
as a stream keeping only its tail, and one inflating past ``SEGMENT_MAX_BYTES`` is refused
naming the file: the resume and the projection say so and go on without the journal.

Each reader runs in a child process whose address space is capped: the old reader died there of
``MemoryError`` instead of taking the machine's memory."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes.capped_child import run_capped, write_gzip_bomb

from state.segments import SEGMENT_MAX_BYTES

_MEMORY_LIMIT = 1 << 30
_REQUESTED_MS = 1_740_787_200_000

_CHILD = """
import logging, sys
logging.basicConfig(level=logging.WARNING)
from pathlib import Path
live = Path(sys.argv[2])
if sys.argv[1] == "resume":
    from runner.sim_start import resumed_start_ms
    print(resumed_start_ms(int(sys.argv[3]), live.parent / "runner_state.json", live))
else:
    from agent.claude_schema import DEFAULT_WAKE_RULES
    from agent.config import AgentConfig
    from runner.cost_projection import projection_text
    print(projection_text(AgentConfig(), live, DEFAULT_WAKE_RULES, 3))
"""


@pytest.mark.timeout(300)
@pytest.mark.parametrize("reader", ["resume", "projection"])
def test_a_gzip_bomb_segment_is_refused_naming_it_within_bounded_memory(
    tmp_path: Path, reader: str
) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    bomb = logs / "decisions.20250302T000000Z.jsonl.gz"
    write_gzip_bomb(bomb, SEGMENT_MAX_BYTES, b"0\n")
    live = logs / "decisions.jsonl"
    live.write_bytes(b"")  # just rotated: the bomb is the newest segment
    argv = (reader, str(live), str(_REQUESTED_MS))
    done = run_capped(_CHILD, *argv, limit_bytes=_MEMORY_LIMIT, timeout_secs=240)
    assert done.returncode == 0, done.stderr[-2000:]
    assert bomb.name in done.stderr and "inflates past" in done.stderr, done.stderr
    if reader == "resume":
        assert done.stdout.strip() == str(_REQUESTED_MS)
    else:
        assert "calls a day" in done.stdout
