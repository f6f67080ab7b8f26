"""state.line_text: what may not stand in one line of a log (Cc but the tab, U+2028/U+2029)."""

from __future__ import annotations

import json
import unicodedata

import orjson
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from state.line_text import (
    as_one_line,
    first_line_break,
    line_text_problem,
    terminal_safe_json,
    terminal_safe_lines,
)


def _breaks_a_line(char: str) -> bool:
    return char != "\t" and (unicodedata.category(char) in ("Cc", "Zl", "Zp"))


@example("ok\tfine")
@example("ok\n12:00:00 INFO runner: forged")
@example("\x85")
@given(st.text(st.characters(codec="utf-8")))
def test_first_line_break_is_the_first_cc_but_tab_or_separator(text: str) -> None:
    expected = next(((at, c) for at, c in enumerate(text) if _breaks_a_line(c)), None)
    assert first_line_break(text) == expected
    assert (line_text_problem(text) is None) == (expected is None)
    one_line = as_one_line(text)
    assert first_line_break(one_line) is None
    assert len(one_line.splitlines()) <= 1  # what str.splitlines (and log readers) end a line at
    if expected is None:
        assert one_line is text


@pytest.mark.parametrize(
    ("text", "shown"),
    [("a\nb", "a\\nb"), ("\x00", "\\x00"), ("\x1b[2J", "\\x1b[2J"), ("x\u2028y", "x\\u2028y")],
)
def test_as_one_line_writes_the_escape(text: str, shown: str) -> None:
    assert as_one_line(text) == shown


def test_the_problem_names_the_character_and_where() -> None:
    problem = line_text_problem("stop\r\nnow")
    assert problem is not None and "U+000D at position 4" in problem


def _drives_a_terminal(char: str) -> bool:
    return char not in "\n\t" and unicodedata.category(char) == "Cc"


@example("\x9b2J")
@given(st.text(st.characters(codec="utf-8")))
def test_json_and_lines_for_a_terminal_hold_no_control_character_and_keep_the_text(
    text: str,
) -> None:
    shown = terminal_safe_json(orjson.dumps({"text": text}, option=orjson.OPT_INDENT_2).decode())
    assert not any(map(_drives_a_terminal, shown))
    assert json.loads(shown) == {"text": text}
    lines = terminal_safe_lines(text)
    assert not any(map(_drives_a_terminal, lines))
    assert lines.count("\n") == text.count("\n")
