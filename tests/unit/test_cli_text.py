"""Free-text arguments that are not UTF-8 are a usage error (exit 2), never a traceback."""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runner.cli import main
from runner.cli_text import utf8_text
from state.models import parse_state_bytes

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


@pytest.mark.parametrize(
    ("reason", "problem"),
    [
        ("disk\n12:00:00 INFO runner: trading resumed", "U+000A at position 4"),
        ("ok\r", "U+000D at position 2"),
        ("nul\x00", "U+0000 at position 3"),
        ("\x1b[2Jcleared", "U+001B at position 0"),
        ("next\u2028line", "U+2028 at position 4"),
        ("r" * 2001, "2,001 characters; a reason is at most 2,000"),
    ],
)
def test_a_halt_reason_that_is_not_one_line_or_too_long_is_exit_2_and_nothing_written(
    tmp_path: Path, reason: str, problem: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A line break forged log lines; over 2,000 characters was a pydantic traceback."""
    with pytest.raises(SystemExit) as exited:
        main(["--state-dir", str(tmp_path), "trading", "halt", "--reason", reason])
    assert exited.value.code == 2
    assert problem in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("reason", ["audit\tby ops", "r" * 2000, "Überprüfung 監査 🛑"])
def test_a_one_line_reason_is_taken_as_it_is(tmp_path: Path, reason: str) -> None:
    assert main(["--state-dir", str(tmp_path), "trading", "halt", "--reason", reason]) == 0
    state, _ = parse_state_bytes((tmp_path / "runner_state.json").read_bytes())
    assert state.trading.reason == reason


@pytest.mark.parametrize("limit", ["nan", "inf", "-inf", "-5", "-0.001", "x"])
def test_a_stale_limit_that_is_not_seconds_0_or_more_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], limit: str
) -> None:
    """``--stale-secs nan`` called a long-dead daemon healthy (no age is over nan), exit 0."""
    heartbeat = tmp_path / "heartbeat"
    heartbeat.write_text("{}")
    os.utime(heartbeat, (0, 0))  # written in 1970: stale by any real limit
    with pytest.raises(SystemExit) as info:
        main(["--state-dir", str(tmp_path), "health", "--stale-secs", limit])
    assert info.value.code == 2
    assert "--stale-secs" in capsys.readouterr().err
    assert main(["--state-dir", str(tmp_path), "health", "--stale-secs", "60"]) == 1
    assert main(["--state-dir", str(tmp_path), "health", "--stale-secs", "0"]) == 1
