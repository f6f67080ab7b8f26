"""A model's lesson is stored as one line whatever characters it holds (``memory.writeback``)."""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from memory.writeback import _one_line
from state.line_text import first_line_break


@given(st.text())
@example("a\nb\r\x1b[2J\x07\x00\x9b\u2028c")
def test_a_lesson_is_one_line_and_keeps_its_words(text: str) -> None:
    line = _one_line(text)
    assert first_line_break(line) is None
    assert line == line.strip()
    if first_line_break(text) is None:  # nothing to escape: its words, one space between
        assert line == " ".join(text.split())
