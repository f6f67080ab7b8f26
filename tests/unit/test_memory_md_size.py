"""A MEMORY.md far larger than notes are (a sparse file, a log pasted in, one line of a megabyte
or more): the prompt reads a bounded start of it, and the write-back leaves it as it is."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memory.tiers import MEMORY_READ_CHARS, MEMORY_WRITE_MAX_BYTES, ProjectTier, TierError

BIG = 64 << 20  # past both bounds; a sparse file, so it costs no disk


def _sparse(path: Path, size: int, head: bytes = b"# MEMORY\nweekends are thin\n") -> None:
    with path.open("wb") as fh:
        fh.write(head)
        fh.truncate(size)  # the rest reads as NUL bytes, one line with no end


def test_one_huge_line_is_read_up_to_the_bound(tmp_path: Path) -> None:
    """The 200 lines were read whatever their length: one line of 2 GB (NUL bytes of a sparse
    file) was read whole, into the daemon's memory, and held there."""
    tier = ProjectTier(tmp_path)
    _sparse(tier.memory_path, BIG)
    notes = tier.notes()
    assert notes.startswith("# MEMORY\nweekends are thin")
    assert len(notes) <= MEMORY_READ_CHARS


def test_lines_of_a_megabyte_each_are_read_up_to_the_bound(tmp_path: Path) -> None:
    tier = ProjectTier(tmp_path)
    tier.memory_path.write_text("# MEMORY\n" + ("x" * (1 << 20) + "\n") * 3, encoding="utf-8")
    assert tier.notes().startswith("# MEMORY\nxxx")
    assert len(tier.notes()) <= MEMORY_READ_CHARS


def test_the_write_back_leaves_a_memory_md_over_its_bound_as_it_is(tmp_path: Path) -> None:
    """Each trade's [auto] line read the whole file and wrote it again: a sparse file of 2 GB
    became 2 GB on disk, again at every decision that traded."""
    tier = ProjectTier(tmp_path)
    _sparse(tier.memory_path, MEMORY_WRITE_MAX_BYTES + 1)
    before = os.stat(tier.memory_path)
    with pytest.raises(TierError, match="left as it is"):
        tier.remember("2025-03-10", "BTC/USDT", "BUY 10% by claude: breakout")
    after = os.stat(tier.memory_path)
    assert (after.st_ino, after.st_size, after.st_mtime_ns, after.st_blocks) == (
        before.st_ino,
        before.st_size,
        before.st_mtime_ns,
        before.st_blocks,
    )
    assert tier.notes().startswith("# MEMORY\nweekends are thin")


def test_the_write_back_still_writes_a_memory_md_within_its_bound(tmp_path: Path) -> None:
    tier = ProjectTier(tmp_path)
    tier.memory_path.write_text("# MEMORY\n" + "a person's line\n" * 1000, encoding="utf-8")
    tier.remember("2025-03-10", "BTC/USDT", "BUY 10% by claude: breakout")
    text = tier.memory_path.read_text(encoding="utf-8")
    assert "- [auto 2025-03-10 BTC/USDT] BUY 10% by claude: breakout" in text
    assert text.count("a person's line\n") == 1000
