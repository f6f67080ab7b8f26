"""``compare_reports``: both runs' values side by side with the relative change."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes.report_support import DECISIONS, FILLS, decision_line, write_run

from report.compare import compare_reports, compare_runs, relative_change_pct
from report.figures import RunFolderError, build_report


def _row(table: str, label: str) -> list[str]:
    for line in table.splitlines():
        if line.startswith(label + "  "):
            return line[len(label) :].split()
    raise AssertionError(f"no row {label!r} in\n{table}")


def test_side_by_side_with_relative_change(tmp_path: Path) -> None:
    a = build_report(write_run(tmp_path / "a"))
    doubled = [decision_line(*d) for d in DECISIONS]
    for line in doubled:
        line["snapshot"]["portfolio_value"] *= 2
    b = build_report(write_run(tmp_path / "b", decisions=doubled, fills=FILLS[:2]))
    table = compare_reports(a, b)
    assert f"a: {tmp_path / 'a'}" in table and f"b: {tmp_path / 'b'}" in table
    assert _row(table, "end equity USD") == ["11,025.0000", "22,050.0000", "+100.0%"]
    assert _row(table, "trades") == ["5", "2", "-60.0%"]
    # a percentage also shows the change in points
    assert _row(table, "total return %") == ["10.2500", "10.2500", "+0.0%", "(+0.00", "pts)"]
    assert _row(table, "win rate %")[1:3] == ["n/a", "n/a"]  # b has no round trip
    assert _row(table, "decided by claude (ok)") == ["2", "2", "+0.0%"]


def test_relative_change_edge_cases() -> None:
    assert relative_change_pct(200.0, 150.0) == pytest.approx(-25.0)
    assert relative_change_pct(-10.0, -5.0) == pytest.approx(50.0)
    assert relative_change_pct(0.0, 5.0) is None
    assert relative_change_pct(None, 5.0) is None


def test_compare_runs_reads_both_folders_and_names_a_missing_one(tmp_path: Path) -> None:
    run = write_run(tmp_path / "a")
    assert compare_runs(run, run) == compare_reports(build_report(run), build_report(run))
    with pytest.raises(RunFolderError, match="missing"):
        compare_runs(run, tmp_path / "nope")
