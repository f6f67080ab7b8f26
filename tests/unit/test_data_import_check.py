"""``vigil data import`` / ``check``: Binance archive files made here, in every form the archive
has used (header or not, zip or CSV, ms or us timestamps), into the documented layout."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pandas as pd
import pytest

from market.archive import parse_archive_name, read_archive_file
from market.datacheck import check_data_dir
from market.recorded import MalformedDataError, load_klines
from runner.cli import main

MARCH_1_MS = 1_740_787_200_000
BAR_MS = 300_000
ARCHIVE_COLUMNS = (
    "open_time,open,high,low,close,volume,close_time,quote_volume,count,"
    "taker_buy_volume,taker_buy_quote_volume,ignore"
)


def recorded(ticker: str, first_ms: int, bars: int) -> pd.DataFrame:
    frame = load_klines(ticker, "5m")
    return frame.loc[first_ms : first_ms + (bars - 1) * BAR_MS]


def archive_text(frame: pd.DataFrame, *, header: bool, micros: bool) -> str:
    scale = 1000 if micros else 1
    lines = [ARCHIVE_COLUMNS] if header else []
    columns = ["open", "high", "low", "close", "volume"]
    for t, *values in frame[columns].itertuples(name=None):
        open_time = int(t) * scale
        close_time = (int(t) + BAR_MS - 1) * scale
        ohlcv = ",".join(repr(float(v)) for v in values)
        lines.append(f"{open_time},{ohlcv},{close_time},1.0,7,0.5,0.5,0")
    return "\n".join(lines) + "\n"


def write_archive(folder: Path, name: str, text: str, *, zipped: bool) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    if not zipped:
        path = folder / f"{name}.csv"
        path.write_text(text)
        return path
    path = folder / f"{name}.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{name}.csv", text)
    return path


@pytest.mark.parametrize(
    ("header", "micros", "zipped"),
    [(True, False, False), (False, False, True), (False, True, True), (True, True, False)],
)
def test_every_archive_form_reads_to_the_recorded_values(
    tmp_path: Path, header: bool, micros: bool, zipped: bool
) -> None:
    expected = recorded("BTC/USDT", MARCH_1_MS, 48)
    text = archive_text(expected, header=header, micros=micros)
    path = write_archive(tmp_path, "BTCUSDT-5m-2025-03-01", text, zipped=zipped)
    parsed = read_archive_file(path)
    assert (parsed.ticker, parsed.interval) == ("BTC/USDT", "5m")
    pd.testing.assert_frame_equal(parsed.frame, expected, check_names=False)


def test_names_and_malformed_files_are_refused_naming_the_file(tmp_path: Path) -> None:
    assert parse_archive_name(Path("ETHUSDT-15m-2025-03.zip")) == ("ETH/USDT", "15m")
    with pytest.raises(MalformedDataError, match="not a Binance archive"):
        parse_archive_name(Path("prices.csv"))
    with pytest.raises(MalformedDataError, match="2h klines"):
        parse_archive_name(Path("BTCUSDT-2h-2025-03.csv"))
    bad = tmp_path / "BTCUSDT-5m-2025-03-01.csv"
    bad.write_text("1740787200000,1,2\n")
    with pytest.raises(MalformedDataError, match=str(bad)):
        read_archive_file(bad)
    broken_zip = tmp_path / "BTCUSDT-5m-2025-03-02.zip"
    broken_zip.write_bytes(b"not a zip")
    with pytest.raises(MalformedDataError, match="BadZipFile"):
        read_archive_file(broken_zip)


def test_cli_import_merges_overlapping_files_and_check_finds_gap_and_duplicate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A month file and an overlapping day file import to one row per bar, equal to the recording.
    Then a planted gap and a planted duplicate are what ``data check`` reports (exit 1)."""
    month = recorded("ETH/USDT", MARCH_1_MS, 288 * 2)
    day = month.iloc[200:300]
    files = [
        write_archive(
            tmp_path / "in",
            "ETHUSDT-5m-2025-03",
            archive_text(month, header=False, micros=False),
            zipped=True,
        ),
        write_archive(
            tmp_path / "in",
            "ETHUSDT-5m-2025-03-01",
            archive_text(day, header=True, micros=True),
            zipped=False,
        ),
    ]
    out = tmp_path / "data"
    assert main(["data", "import", *map(str, files), "--out", str(out)]) == 0
    assert "different values" not in capsys.readouterr().out  # the same bars twice: no news
    pd.testing.assert_frame_equal(load_klines("ETH/USDT", "5m", out), month)
    assert main(["data", "check", str(out)]) == 0
    assert "ETHUSDT-5m.csv.gz: klines 5m, 576 rows" in capsys.readouterr().out

    planted = tmp_path / "planted"
    holed = pd.concat(
        [month.iloc[:100], month.iloc[103:], month.iloc[[400]]]
    )  # 3 bars out, 1 twice
    (planted / "binance-usdm").mkdir(parents=True)
    holed.to_csv(planted / "binance-usdm" / "ETHUSDT-5m.csv.gz")
    [check] = check_data_dir(planted)
    assert not check.ok
    assert (check.gap_count, check.missing_bars, check.duplicate_count) == (1, 3, 1)
    assert check.gaps[0].after == "2025-03-01 08:15" and check.gaps[0].before == "2025-03-01 08:35"
    assert check.duplicates == ["2025-03-02 09:20"]
    assert main(["data", "check", str(planted)]) == 1
    printed = capsys.readouterr().out
    assert "1 gap(s), 3 missing" in printed and "1 duplicate(s): 2025-03-02 09:20" in printed


def test_check_reports_misaligned_bars_and_unreadable_files(tmp_path: Path) -> None:
    folder = tmp_path / "binance-usdm"
    folder.mkdir()
    frame = recorded("SOL/USDT", MARCH_1_MS, 10)
    frame.index = frame.index.where(
        frame.index != MARCH_1_MS + 3 * BAR_MS, MARCH_1_MS + 3 * BAR_MS + 60_000
    )
    frame.to_csv(folder / "SOLUSDT-5m.csv.gz")
    (folder / "BTCUSDT-5m.csv.gz").write_bytes(b"\x1f\x8bnot gzip")
    checks = {Path(c.path).name: c for c in check_data_dir(tmp_path)}
    assert checks["SOLUSDT-5m.csv.gz"].misaligned == ["2025-03-01 00:16"]
    assert checks["BTCUSDT-5m.csv.gz"].error is not None


def test_import_of_a_malformed_file_exits_78_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "SOLUSDT-5m-2025-03-01.csv"
    bad.write_text("open_time,open\nabc,def\n")
    assert main(["data", "import", str(bad), "--out", str(tmp_path / "out")]) == 78
    assert str(bad) in capsys.readouterr().err


def test_import_says_how_many_bars_were_given_different_values(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two archives disagreeing on a bar, or a revised archive over the stored file: the newest
    row won without a word. It still wins, and the command says how many bars, per file written."""
    month = recorded("ETH/USDT", MARCH_1_MS, 288)
    revised = month.iloc[10:20].copy()
    volume = revised["volume"].to_numpy(copy=True)
    volume[[2, 5]] += 1.0  # 01:00 and 01:15 changed
    revised["volume"] = volume
    first = write_archive(
        tmp_path / "a", "ETHUSDT-5m-2025-03-01", archive_text(month, header=False, micros=False),
        zipped=False,
    )  # fmt: skip
    second = write_archive(
        tmp_path / "b", "ETHUSDT-5m-2025-03-01", archive_text(revised, header=True, micros=False),
        zipped=False,
    )  # fmt: skip
    out = tmp_path / "data"
    written = out / "binance-usdm" / "ETHUSDT-5m.csv.gz"
    assert main(["data", "import", str(first), str(second), "--out", str(out)]) == 0
    assert capsys.readouterr().out == (
        f"{written}: 288 bars (298 rows read from 2 file(s)); 2 bar(s) given different values, "
        "the row read last kept, files in the order given (first at 2025-03-01T01:00:00Z)\n"
    )
    kept = load_klines("ETH/USDT", "5m", out)
    assert kept.loc[revised.index[2], "volume"] == revised.iloc[2]["volume"]

    assert main(["data", "import", str(first), "--out", str(out)]) == 0  # the old values again
    assert capsys.readouterr().out == (
        f"{written}: 288 bars (288 rows read from 1 file(s)); 2 stored bar(s) replaced by "
        "different values (first at 2025-03-01T01:00:00Z)\n"
    )
    pd.testing.assert_frame_equal(load_klines("ETH/USDT", "5m", out), month)
