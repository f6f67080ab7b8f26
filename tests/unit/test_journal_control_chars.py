"""A JSON line a person tails (``decisions.jsonl``, ``vigil.log`` in the json format) holds no raw
control character: orjson escapes U+0000..U+001F but writes DEL and U+0080..U+009F as they are, and
a terminal reads U+009B as ESC [ (CSI): a model's reasoning or an exchange's error text holding it
drove the terminal of whoever tailed the journal. They are written as ``\\u`` escapes now, the same
JSON text; a line reads back as the record it was."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import orjson
from hypothesis import example, given
from hypothesis import strategies as st

from runner.logging_setup import JsonLinesFormatter
from state.journal import JsonlJournal

#: C0 (the line's own newline aside), DEL and C1
_RAW_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
_TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=40)


def _one_line(data: bytes) -> str:
    assert data.endswith(b"\n") and data.count(b"\n") == 1, data
    line = data[:-1].decode("utf-8")
    assert _RAW_CONTROL.search(line) is None, line
    return line


@given(text=_TEXT, key=_TEXT)
@example(text="before \x9b31m red \x9d0;title\x07 \x7f after", key="\x85")
def test_a_journal_line_holds_no_raw_control_character(
    tmp_path_factory: Any, text: str, key: str
) -> None:
    path = tmp_path_factory.mktemp("j") / "decisions.jsonl"
    record = {"at_ms": 1, "reasoning": text, "context": {key: [text, 1.5]}}
    with JsonlJournal(path, fsync=False) as journal:
        journal.append(record)
    assert orjson.loads(_one_line(path.read_bytes())) == record


def test_a_degraded_line_holds_none_either(tmp_path: Path) -> None:
    path = tmp_path / "decisions.jsonl"
    with JsonlJournal(path, fsync=False) as journal:
        journal.append({"at_ms": 1, "reasoning": "\x9b2J", "bad": float("nan")})
    assert "\\u009b2J" in _one_line(path.read_bytes())


@given(text=_TEXT)
@example(text="exchange said \x9b2J")
def test_a_json_log_line_holds_no_raw_control_character(text: str) -> None:
    record = logging.LogRecord("vigil", logging.WARNING, __file__, 1, "%s", (text,), None)
    line = JsonLinesFormatter().format(record)
    assert orjson.loads(_one_line(line.encode() + b"\n"))["message"] == text
