"""Free-text arguments that are not UTF-8 are a usage error (exit 2), never a traceback."""

from __future__ import annotations

import argparse
import math
import os
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runner.cli import main
from runner.cli_text import finite_number, utf8_text, whole_number
from state.models import parse_state_bytes

NOT_UTF8 = "ok \udcff"  # what Python makes of the byte 0xff in argv (surrogateescape)


@pytest.mark.parametrize(
    "command",
    [
        ["trading", "halt", "--reason", NOT_UTF8],
        ["memory", "add", f"a lesson about the retest {NOT_UTF8}"],
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


@pytest.mark.parametrize("reason", ["", " ", "   \t ", "\u3000", "\u200b"])
def test_a_halt_reason_with_nothing_to_read_is_exit_2_and_nothing_written(
    tmp_path: Path, reason: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """It was stored: the status showed the halt with no reason, or "no reason given"."""
    with pytest.raises(SystemExit) as exited:
        main(["--state-dir", str(tmp_path), "trading", "halt", "--reason", reason])
    assert exited.value.code == 2
    assert (
        "argument --reason: is empty or only spaces: a halt needs a reason a person can read"
        in capsys.readouterr().err
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("reason", ["audit\tby ops", "r" * 2000, "Überprüfung 監査 🛑", " x "])
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


@given(
    st.one_of(st.integers(), st.text(max_size=12), st.floats().map(repr)),
    st.integers(-5, 5),
    st.one_of(st.none(), st.integers(5, 70_000)),
)
def test_a_whole_number_argument_is_in_its_range_or_a_usage_error(
    value: object, low: int, high: int | None
) -> None:
    text = str(value)
    parse = whole_number("things", low, high)
    try:
        expected: int | None = int(text)
    except ValueError:
        expected = None
    if expected is None or expected < low or (high is not None and expected > high):
        with pytest.raises(argparse.ArgumentTypeError, match="things"):
            parse(text)
    else:
        assert parse(text) == expected


@given(
    st.one_of(st.floats().map(repr), st.text(max_size=12), st.sampled_from(["0", "-0", "nan"])),
    st.booleans(),
)
def test_a_finite_number_argument_is_over_its_bound_or_a_usage_error(
    text: str, low_allowed: bool
) -> None:
    parse = finite_number("days", 0.0, low_allowed=low_allowed)
    try:
        number: float | None = float(text)
    except ValueError:
        number = None
    if (
        number is not None
        and math.isfinite(number)
        and (number > 0 or (low_allowed and number == 0))
    ):
        assert parse(text) == number
    else:
        with pytest.raises(argparse.ArgumentTypeError, match="days"):
            parse(text)


@pytest.mark.parametrize(
    ("argv", "refused"),
    [
        (["sim", "--port", "65536"], "65536 is out of range (port: 0 to 65,535)"),
        (["sim", "--port", "http"], "'http' is not a whole number (port: 0 to 65,535)"),
        (["memory", "list", "--limit", "0"], "0 is out of range (rows: 1 to 100,000)"),
        (
            ["memory", "add", "a lesson", "--ttl-days", "0"],
            "0 is out of range (days: finite, above 0)",
        ),
        (
            ["sweep", "grid.toml", "--out", "o", "--workers", "0"],
            "0 is out of range (workers: 1 to 128)",
        ),
        (  # a process each: 100000 were started
            ["sweep", "grid.toml", "--out", "o", "--workers", "100000"],
            "100000 is out of range (workers: 1 to 128)",
        ),
        (["--state-dir", "", "status"], "--state-dir: an empty path"),
        (["sweep", "grid.toml", "--out", ""], "--out: an empty path"),
        (["replay", "--from", "2025-03-01", "--to", "2025-03-01", "--out", " "], "an empty path"),
        (
            [
                *("data", "fetch", "--tickers", "BTC/USDT", "--from", "2025-03-01"),
                *("--to", "2025-03-02", "--out", ""),
            ],
            "--out: an empty path (write '.' for the working directory)",
        ),
        (["data", "check", ""], "data_dir: an empty path"),
    ],
)
def test_each_counted_argument_names_its_range_when_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], refused: str
) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--state-dir", str(tmp_path), *argv])
    assert info.value.code == 2
    assert refused in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_a_refused_number_is_quoted_cut_short() -> None:
    long = "9" * 4000  # int() reads up to 4,300 digits
    for parse in (whole_number("ports", 0, 65535), finite_number("days", 0.0, low_allowed=False)):
        for value in (long, "x" * 4000, "-" + long):
            with pytest.raises(argparse.ArgumentTypeError) as refused:
                parse(value)
            assert len(str(refused.value)) < 120
