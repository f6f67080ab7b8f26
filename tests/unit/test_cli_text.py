"""Free-text arguments that are not UTF-8 are a usage error (exit 2), never a traceback."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runner.cli import main
from runner.cli_text import utf8_text

NOT_UTF8 = "ok \udcff"  # what Python makes of the byte 0xff in argv (surrogateescape)


@pytest.mark.parametrize(
    "command",
    [
        ["trading", "halt", "--reason", NOT_UTF8],
        ["memory", "add", f"a lesson about the retest {NOT_UTF8}"],
        ["memory", "add", "a lesson about the retest of support", "--ticker", NOT_UTF8],
        ["memory", "search", NOT_UTF8],
        ["memory", "forget", NOT_UTF8],
    ],
)
def test_a_byte_that_is_not_utf8_is_refused_with_exit_2_and_nothing_written(
    tmp_path: Path, command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--state-dir", str(tmp_path), *command])
    assert exited.value.code == 2
    assert re.search(r"not UTF-8 text: byte 0xff at position \d+ ", capsys.readouterr().err)
    assert list(tmp_path.iterdir()) == []  # no state file, no memory store


@given(st.text(alphabet=st.characters(exclude_categories=[])))  # surrogates too
def test_utf8_text_passes_text_unchanged_and_refuses_surrogates(value: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        with pytest.raises(argparse.ArgumentTypeError, match="not UTF-8 text"):
            utf8_text(value)
    else:
        assert utf8_text(value) is value
