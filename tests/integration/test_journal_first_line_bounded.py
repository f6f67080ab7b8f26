"""A live ``decisions.jsonl`` whose first line is a gigabyte long (a sparse file's zeros before the
first newline: ``truncate -s 1G`` then lines appended, or a crash's extension that later lines
followed) at the start of a rotating journal: the rotation's first-line read (the instant the
segment began) held the whole line, twice over while joining it, so the start exhausted memory.
It now reads at most ``LINE_MAX_BYTES``: such a run is no line and has no instant.

The journal is opened in a child process whose address space is capped: the old read died there
of ``MemoryError`` instead of taking the machine's memory."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes.capped_child import GIGABYTE, run_capped, sparse_size

_MEMORY_LIMIT = 768 << 20

_CHILD = """
import sys
from pathlib import Path
from state.journal import JsonlJournal
from state.rotation import JournalRotationConfig
with JsonlJournal(Path(sys.argv[1]), fsync=False, rotation=JournalRotationConfig()) as journal:
    journal.append({"type": "agent_failure", "at_ms": 1740787200000, "kind": "t", "detail": "x"})
print("opened")
"""


@pytest.mark.timeout(120)
def test_a_gigabyte_first_line_is_not_read_whole_at_open(tmp_path: Path) -> None:
    path = tmp_path / "decisions.jsonl"
    sparse_size(path, GIGABYTE)
    with path.open("ab") as handle:
        handle.write(b'\n{"at_ms": 1740787200000, "type": "agent_failure"}\n')
    done = run_capped(_CHILD, str(path), limit_bytes=_MEMORY_LIMIT)
    assert done.returncode == 0 and done.stdout.strip() == "opened", done.stderr[-2000:]
