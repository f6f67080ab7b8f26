"""``vigil data fetch`` over a partial file (``<out>/.partial/``) that no fetch wrote: a person's
edit, another file, bytes that are not text, a folder. Each was a traceback (or a request it could
not store); now the fetch is refused naming the file and line (exit 78) before any request, and the
file is kept as it was."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.errors import EXIT_REFUSE_TO_START
from runner.cli import main

#: nothing listens there: a fetch that got past the partial file would fail on the connection
NOWHERE = "http://127.0.0.1:9"
HEADER = b"open_time_ms,open,high,low,close,volume\r\n"
ROW = b"1740787200000,84000.1,84100.0,83900.5,84050.0,12.5\r\n"


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (HEADER + ROW + b"abc,1,2,3,4,5\r\n" + ROW, "line 3"),
        (HEADER + ROW + b"1740787500000,84000.1,nan,83900.5,84050.0,12.5\r\n", "line 3"),
        (HEADER + ROW + b"1740787500000,84000.1\r\n" + ROW, "line 3"),
        (HEADER + b"\xff\xfe garbage\r\n", "UnicodeDecodeError"),
        (b"time,price\r\n" + ROW, "line 1"),
    ],
)
def test_a_partial_file_no_fetch_wrote_is_refused_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, said: str
) -> None:
    partial = tmp_path / "out" / ".partial" / "BTCUSDT-5m.csv"
    partial.parent.mkdir(parents=True)
    partial.write_bytes(content)
    assert fetch(tmp_path) == EXIT_REFUSE_TO_START
    err = capsys.readouterr().err
    assert str(partial) in err and said in err and "Traceback" not in err
    assert partial.read_bytes() == content


def test_a_folder_in_place_of_the_partial_file_is_refused_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    partial = tmp_path / "out" / ".partial" / "BTCUSDT-5m.csv"
    partial.mkdir(parents=True)
    assert fetch(tmp_path) == EXIT_REFUSE_TO_START
    assert f"{partial}: exists but is not a regular file" in capsys.readouterr().err
    assert partial.is_dir()


def fetch(tmp_path: Path) -> int:
    return main(
        [
            *("--state-dir", str(tmp_path / "state"), "data", "fetch", "--tickers", "BTC/USDT"),
            *("--from", "2025-03-01", "--to", "2025-03-02", "--out", str(tmp_path / "out")),
            *("--exchange-url", NOWHERE, "--no-funding"),
        ]
    )
