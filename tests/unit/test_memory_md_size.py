"""A MEMORY.md far larger than notes are (a sparse file, a log pasted in, one line of a megabyte
or more): the prompt reads a bounded start of it, and the write-back leaves it as it is."""

from __future__ import annotations

from pathlib import Path

from memory.tiers import MEMORY_READ_CHARS, ProjectTier

BIG = 64 << 20  # past the bound; a sparse file, so it costs no disk


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
