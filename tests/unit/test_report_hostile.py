"""``vigil report`` on run folders a person or a crash mangled: each is refused with a line naming
the file and what is wrong (exit 2), or reported with the bad value left out; never a traceback."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fakes.report_support import DECISIONS, FILLS, T0, decision_line, write_run

from runner.cli import EXIT_USAGE, main


def lines_with(index: int, edit: Callable[[dict[str, Any]], None]) -> list[dict[str, Any]]:
    lines = [decision_line(*d) for d in DECISIONS]
    edit(lines[index])
    return copy.deepcopy(lines)


def report(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["report", str(run_dir)])
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    "at_ms", [2**62, 300_000_000_000_000, -(10**18), 1_000, T0 // 1000], ids=str
)
def test_a_journal_time_outside_the_recording_years_is_refused_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], at_ms: int
) -> None:
    run = write_run(tmp_path, lines_with(1, lambda line: line.update(at_ms=at_ms)))
    code, err = report(run, capsys)
    assert code == EXIT_USAGE
    assert f"decisions.jsonl: a decision line has at_ms {at_ms}" in err
    assert "2010 .. 2100" in err and "Traceback" not in err
    assert not (run / "report.json").exists()


def test_a_fill_time_outside_the_recording_years_is_refused_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = write_run(tmp_path, fills=[(2**62, *FILLS[0][1:])])
    code, err = report(run, capsys)
    assert code == EXIT_USAGE
    assert f"trades.csv: the fill of BTC/USDT has at_ms {2**62}" in err
    assert not (run / "report.json").exists()
