"""``vigil data check`` on files a person mangled: every file gets a line, none a traceback or a
hang, and a file the replay would refuse is never reported ok."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest
from fakes.fifo import outcome_beside_fifo
from hypothesis import given, settings
from hypothesis import strategies as st
from property_budget import examples

from core.errors import EXIT_REFUSE_TO_START
from market.datacheck import FileCheck, check_data_dir
from market.recorded import MalformedDataError, read_kline_file
from runner.cli import main

T0_MS = 1_740_787_200_000  # 2025-03-01 00:00 UTC
BAR_MS = 300_000
HEADER = "open_time_ms,open,high,low,close,volume\n"


def write(data_dir: Path, name: str, text: str) -> Path:
    path = data_dir / "binance-usdm" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(text.encode()))
    return path


def only_check(data_dir: Path) -> FileCheck:
    [check] = check_data_dir(data_dir)
    return check


@pytest.mark.parametrize(
    ("rows", "said"),
    [
        ("99999999999999999999999,100,101,99,100,10\n", "not a whole number"),
        ("9000000000000000000,100,101,99,100,10\n", "outside 2010 .. 2100"),
        ("253402300500000,100,101,99,100,10\n", "outside 2010 .. 2100"),
        (",100,101,99,100,10\n", "nan is not a whole number"),
        (f"{T0_MS}.5,100,101,99,100,10\n", "not a whole number"),
        (f"{T0_MS},100,90,110,100,10\n", "high below low"),
        (f"{T0_MS},nan,101,99,100,10\n", "non-finite"),
        (f"{T0_MS},abc,101,99,100,10\n", "not numbers"),
        (f"{T0_MS},1e300,1e300,1e300,1e300,10\n", "a price above 1e+09"),
        (f"{T0_MS},100,1e10,99,100,10\n", "a price above 1e+09"),
        (f"{T0_MS},1e-9,2e-9,1e-9,1e-9,10\n", "a price under 1e-08"),
        (f"{T0_MS},100,101,99,100,1e308\n", "a volume above 1e+18"),
    ],
)
def test_a_kline_file_replay_refuses_is_never_ok(tmp_path: Path, rows: str, said: str) -> None:
    write(tmp_path, "BTCUSDT-5m.csv.gz", HEADER + rows)
    check = only_check(tmp_path)
    assert not check.ok
    assert said in (check.error or " ".join(check.bad_rows))


def test_funding_and_fear_greed_replay_refuses_are_never_ok(tmp_path: Path) -> None:
    write(tmp_path, "BTCUSDT-funding.csv.gz", f"funding_time_ms,funding_rate\n{T0_MS},nan\n")
    fng = tmp_path / "alternative-me" / "fear-greed-daily.csv"
    fng.parent.mkdir()
    fng.write_text("timestamp_s,value,classification\n1740787200,,Fear\n")
    checks = {c.kind: c for c in check_data_dir(tmp_path)}
    assert checks["funding"].bad_rows == ["1 with a non-finite rate, the first 2025-03-01 00:00"]
    assert "value: nan is not a whole number" in (checks["fear_greed"].error or "")
    fng.write_text("timestamp_s,value,classification\n" + "9" * 20 + ",1,Fear\n")
    assert "not a whole number" in (only_fear_greed(tmp_path).error or "")


def only_fear_greed(data_dir: Path) -> FileCheck:
    return next(c for c in check_data_dir(data_dir) if c.kind == "fear_greed")


def test_a_fifo_directory_or_dangling_link_is_named_not_opened(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "binance-usdm"
    folder.mkdir()
    os.mkfifo(folder / "BTCUSDT-5m.csv.gz")
    (folder / "ETHUSDT-5m.csv.gz").mkdir()
    (folder / "SOLUSDT-5m.csv.gz").symlink_to(tmp_path / "gone")
    fifo = folder / "BTCUSDT-5m.csv.gz"
    result = outcome_beside_fifo(lambda: main(["data", "check", str(tmp_path)]), fifo)
    assert result == 1
    assert capsys.readouterr().out.count("ERROR not a regular file") == 3


TIMES = st.one_of(
    st.integers(0, 40).map(lambda i: str(T0_MS + i * BAR_MS)),
    st.sampled_from(["", "abc", f"{T0_MS}.5", "9" * 23, "1740787200", "-1", "253402300500000"]),
)
PRICES = st.one_of(
    st.sampled_from(["", "nan", "inf", "-1", "0", "abc", "99", "100", "101"]),
    st.floats(0.5, 200.0).map(repr),
)


@settings(max_examples=examples(150), deadline=None)
@given(rows=st.lists(st.tuples(TIMES, PRICES, PRICES, PRICES, PRICES, PRICES), max_size=6))
def test_check_never_raises_and_never_calls_ok_what_replay_refuses(
    tmp_path_factory: pytest.TempPathFactory, rows: list[tuple[str, ...]]
) -> None:
    data_dir = tmp_path_factory.mktemp("check")
    path = write(data_dir, "BTCUSDT-5m.csv.gz", HEADER + "".join(",".join(r) + "\n" for r in rows))
    check = only_check(data_dir)
    try:
        read_kline_file(path)
    except MalformedDataError:
        assert not check.ok


@pytest.mark.parametrize("case", ["missing", "a file", "/dev/null"])
def test_a_data_dir_that_is_not_a_folder_is_named_as_such(
    tmp_path: Path, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file or a device was called a data dir that "does not exist"."""
    path = {"missing": tmp_path / "nope", "a file": tmp_path / "f", "/dev/null": Path("/dev/null")}
    path["a file"].write_text("")
    why = "does not exist" if case == "missing" else "is not a folder"
    assert main(["data", "check", str(path[case])]) == EXIT_REFUSE_TO_START
    assert f"data dir {path[case]} {why}" in capsys.readouterr().err


def test_control_characters_in_a_file_are_printed_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a header that would retitle the terminal (OSC 0) and clear it if printed raw
    write(tmp_path, "BTCUSDT-5m.csv.gz", "\x1b]0;owned\x07time\x1b[2J,open\n1,2\n")
    assert main(["data", "check", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert "\\x1b]0;owned\\x07time\\x1b[2J" in out


def test_a_fear_greed_value_replay_refuses_is_a_bad_row(tmp_path: Path) -> None:
    fng = tmp_path / "alternative-me" / "fear-greed-daily.csv"
    fng.parent.mkdir()
    fng.write_text("timestamp_s,value,classification\n1740787200,26,Fear\n1740873600,500,Fear\n")
    [check] = check_data_dir(tmp_path)
    assert check.bad_rows == ["1 with a value outside 0 .. 100, the first 2025-03-02 00:00"]
    assert not check.ok


@pytest.mark.parametrize("bad", [f"{T0_MS + 100 * BAR_MS}.5", "0x1954e7a2c00", "nan"])
def test_a_time_that_is_not_whole_is_quoted_not_the_first_row(tmp_path: Path, bad: str) -> None:
    """One such row makes the column float (or text), and the first row, a good one, was quoted
    as the bad one: ``1740787200000.0 is not a whole number``."""
    good = "".join(f"{T0_MS + i * BAR_MS},100,101,99,100,10\n" for i in range(100))
    write(tmp_path, "BTCUSDT-5m.csv.gz", HEADER + good + f"{bad},100,101,99,100,10\n")
    check = only_check(tmp_path)
    assert check.error is not None and "is not a whole number" in check.error
    assert str(T0_MS) not in check.error
    assert (bad.split(".", maxsplit=1)[0] if bad.endswith(".5") else bad) in check.error
