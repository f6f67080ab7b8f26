"""A MEMORY.md an editor saved with a byte order mark (Notepad does): read and written back like
one without, its mark kept."""

from __future__ import annotations

from pathlib import Path

from memory.tiers import AUTO_HEADING, ProjectTier


def test_the_write_back_keeps_the_title_first_and_the_mark_where_it_was(tmp_path: Path) -> None:
    """The title behind the mark was not seen as one (it did not start with ``# ``): the daemon's
    heading went above it, and the mark ended up in the middle of the file."""
    tier = ProjectTier(tmp_path)
    tier.memory_path.write_bytes("\ufeff# MEMORY\r\nweekends are thin\r\n".encode())
    tier.remember("2025-03-10", "BTC/USDT", "BUY 10% by claude: breakout")
    text = tier.memory_path.read_bytes().decode("utf-8")
    assert text.startswith("\ufeff# MEMORY\r\n") and text.count("\ufeff") == 1
    assert text.index(AUTO_HEADING) > 0 and "weekends are thin\r\n" in text


def test_the_notes_sent_hold_no_mark(tmp_path: Path) -> None:
    tier = ProjectTier(tmp_path)
    tier.memory_path.write_bytes("\ufeff# MEMORY\nweekends are thin\n".encode())
    assert tier.notes() == "# MEMORY\nweekends are thin"
