"""An exits outbox ending in a gigabyte of zeros (a crash's: the file extended, the line not
written; here a sparse file) at the daemon's start: the write-ahead reader (``state.fsynced_lines``,
the outbox's and the order journal's) read the whole file and split it, so the start exhausted
memory before it could drop the torn tail. It now reads line by line, passing a run past
``LINE_MAX_BYTES`` without a newline over as it reads it: the zeros are the torn last line,
dropped with a warning and cut off, and the entries before them are kept.

The outbox is loaded in a child process whose address space is capped: the old read died there
of ``MemoryError`` instead of taking the machine's memory."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from fakes.capped_child import GIGABYTE, run_capped, sparse_size

_MEMORY_LIMIT = 768 << 20
_ENTRY = {"seq": 1, "key": "x1", "kind": "exit", "at_ms": 1740787200000, "payload": {"n": 1}}

_CHILD = """
import logging, sys
logging.basicConfig(level=logging.WARNING)
from pathlib import Path
from state.outbox import Outbox
outbox = Outbox(Path(sys.argv[1]))
outbox.load()
print([entry.key for entry in outbox.pending("learner")])
"""


@pytest.mark.timeout(120)
def test_a_gigabyte_of_zeros_after_the_last_entry_is_cut_off_within_bounded_memory(
    tmp_path: Path,
) -> None:
    path = tmp_path / "exits.outbox.jsonl"
    line = orjson.dumps(_ENTRY) + b"\n"
    path.write_bytes(line)
    sparse_size(path, len(line) + GIGABYTE)
    done = run_capped(_CHILD, str(path), limit_bytes=_MEMORY_LIMIT)
    assert done.returncode == 0 and done.stdout.strip() == "['x1']", done.stderr[-2000:]
    assert "dropping torn last line" in done.stderr, done.stderr
    assert path.read_bytes() == line


_CURSOR_CHILD = """
import sys
from pathlib import Path
from core.errors import RefuseToStartError
from state.outbox import Outbox
outbox = Outbox(Path(sys.argv[1]))
outbox.load()
try:
    outbox.pending("learner")
except RefuseToStartError as exc:
    print(exc)
"""


@pytest.mark.timeout(120)
def test_a_cursor_file_of_a_gigabyte_is_refused_naming_it_within_bounded_memory(
    tmp_path: Path,
) -> None:
    """The consumer's cursor file (``<outbox>.learner.ack``) was read whole at the start, before
    its sequence number was checked: a gigabyte of zeros there exhausted memory."""
    path = tmp_path / "exits.outbox.jsonl"
    path.write_bytes(orjson.dumps(_ENTRY) + b"\n")
    cursor = tmp_path / "exits.outbox.jsonl.learner.ack"
    sparse_size(cursor, GIGABYTE)
    done = run_capped(_CURSOR_CHILD, str(path), limit_bytes=_MEMORY_LIMIT)
    assert done.returncode == 0 and str(cursor) in done.stdout, done.stderr[-2000:]
