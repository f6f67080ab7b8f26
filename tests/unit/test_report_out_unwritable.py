"""``vigil report --out`` where the report cannot be written: a file in place of the folder, a folder
in place of ``report.json`` or ``report.html``, a folder under a file. Each is refused in one line
naming the path and why (exit 78, a place the person must fix), and what stood there is kept. They
were ``FileExistsError``, ``IsADirectoryError`` and ``NotADirectoryError`` tracebacks. Both files
are written or neither: report.json was written before report.html failed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from fakes.disk_full import disk_full_after
from fakes.report_support import write_run

from core.errors import EXIT_REFUSE_TO_START
from report.figures import build_report, report_json_bytes
from runner.cli import main


def _a_file(out: Path) -> Path:
    out.write_text("someone's file\n")
    return out


def _folder_at(name: str) -> Callable[[Path], Path]:
    def make(out: Path) -> Path:
        (out / name).mkdir(parents=True)
        return out / name

    return make


@pytest.mark.parametrize(
    ("place", "out_name"),
    [
        (_a_file, "out"),
        (_folder_at("report.json"), "out"),
        (_folder_at("report.html"), "out"),
        (_a_file, "out/deeper"),
    ],
    ids=["out is a file", "folder at report.json", "folder at report.html", "out under a file"],
)
def test_an_out_it_cannot_write_is_refused_naming_it(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    place: Callable[[Path], Path],
    out_name: str,
) -> None:
    run = write_run(tmp_path / "run")
    kept = place(tmp_path / "out")
    out = tmp_path / out_name
    assert main(["report", str(run), "--out", str(out)]) == EXIT_REFUSE_TO_START
    err = capsys.readouterr().err
    assert err.startswith(f"vigil report: cannot write the report into {out}: ")
    assert err.count("\n") == 1 and "Traceback" not in err
    assert kept.is_dir() or kept.read_text() == "someone's file\n"


def test_a_writable_out_still_gets_the_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = write_run(tmp_path / "run")
    out = tmp_path / "new" / "folder"
    assert main(["report", str(run), "--out", str(out)]) == 0
    assert (out / "report.json").is_file() and (out / "report.html").is_file()
    assert capsys.readouterr().out.startswith(f"wrote {out / 'report.json'}")


def test_a_folder_at_report_html_leaves_no_report_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """report.json was written before report.html failed: a half report beside the refusal."""
    run = write_run(tmp_path / "run")
    out = tmp_path / "out"
    (out / "report.html").mkdir(parents=True)
    assert main(["report", str(run), "--out", str(out)]) == EXIT_REFUSE_TO_START
    assert capsys.readouterr().err == (
        f"vigil report: cannot write the report into {out}: {out / 'report.html'}: is a folder; "
        "nothing written\n"
    )
    assert sorted(p.name for p in out.iterdir()) == ["report.html"]


def test_a_page_the_disk_cannot_hold_leaves_the_old_report_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The new report.json was renamed over the old before report.html failed (a full disk): the
    folder held this run's figures beside the page of the last one."""
    run = write_run(tmp_path / "run")
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.json").write_text("{}\n")  # the last report's
    (out / "report.html").write_text("<p>the last report</p>\n")
    json_bytes = len(report_json_bytes(build_report(run)))
    with disk_full_after(json_bytes + 1024):  # the json fits, the page (over 40 kB) does not
        code = main(["report", str(run), "--out", str(out)])
    assert code == EXIT_REFUSE_TO_START
    err = capsys.readouterr().err
    assert err.startswith(
        f"vigil report: cannot write the report into {out}: {out / 'report.html'}: "
    )
    assert err.endswith("; nothing written\n")
    assert (out / "report.json").read_text() == "{}\n"
    assert (out / "report.html").read_text() == "<p>the last report</p>\n"
    assert sorted(p.name for p in out.iterdir()) == ["report.html", "report.json"]  # no tmp left
