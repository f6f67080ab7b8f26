"""``vigil data import`` on hostile archive files and output folders: a refusal naming the file
(exit 78) that writes nothing, or rows the replay loads as they were; never a traceback."""

from __future__ import annotations

import gzip
import struct
import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_budget import examples

import market.archive
from market.archive import read_archive_file
from market.recorded import MalformedDataError, load_klines
from runner.cli import main
from runner.data.layout import store_klines

T0_MS = 1_740_787_200_000  # 2025-03-01 00:00 UTC
BAR_MS = 300_000
NAME = "BTCUSDT-5m-2025-03-01"


def row(
    t: object, o: object = 100.0, h: object = 101.0, lo: object = 99.0, c: object = 100.5
) -> str:
    return f"{t},{o},{h},{lo},{c},10.0,0,1.0,7,0.5,0.5,0\n"


def import_text(tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    source = tmp_path / "in" / f"{NAME}.csv"
    source.parent.mkdir(exist_ok=True)
    source.write_text(text)
    code = main(["data", "import", str(source), "--out", str(tmp_path / "out")])
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("99999999999999999999999,100,101,99,100.5,10\n", "not a whole millisecond"),
        (row(f"{T0_MS}.5"), "not a whole millisecond"),
        (row(1_740_787_200), "within 2010 .. 2100"),  # seconds
        (row(-BAR_MS), "within 2010 .. 2100"),
        (row(T0_MS + 1234), "off the 5m grid"),
        (row(T0_MS, h=90.0, lo=110.0), "high below low"),
        (row(T0_MS, o=200.0), "high below low"),
        (row(T0_MS, 0.0, 0.0, 0.0, 0.0), "price <= 0"),
        (row(T0_MS, 1e300, 1e300, 1e300, 1e300), "a price above 1e+09"),
        (row(T0_MS).replace(",10.0,", ",1e308,"), "a volume above 1e+18"),
        ("open_time,open,high,low,close,volume\n", "no kline rows"),
        ("0x10,100,101,99,100.5,10\n", "no kline rows"),  # read as a header, leaving nothing
    ],
)
def test_a_row_replay_would_refuse_refuses_the_import_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, said: str
) -> None:
    good = "" if said == "no kline rows" else row(T0_MS - BAR_MS)  # one bad row spoils a file
    code, err = import_text(tmp_path, good + text, capsys)
    assert code == 78
    assert said in err and NAME in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_quoted_numbers_are_rows_not_a_header(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _ = import_text(tmp_path, f'"{T0_MS}","100","101","99","100.5","10"\n', capsys)
    assert code == 0
    assert load_klines("BTC/USDT", "5m", tmp_path / "out").index.tolist() == [T0_MS]


def test_an_oversized_csv_or_zip_member_is_refused_before_it_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(market.archive, "MAX_CSV_BYTES", 1000)
    big = "".join(row(T0_MS + i * BAR_MS) for i in range(40))
    plain = tmp_path / f"{NAME}.csv"
    plain.write_text(big)
    with pytest.raises(MalformedDataError, match="over 0 MiB"):
        read_archive_file(plain)
    zipped = tmp_path / f"{NAME}.zip"
    with zipfile.ZipFile(zipped, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(f"{NAME}.csv", big)
    with pytest.raises(MalformedDataError, match="inflates to over"):
        read_archive_file(zipped)


def test_an_existing_file_that_cannot_be_merged_into_is_refused_and_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stored = tmp_path / "out" / "binance-usdm" / "BTCUSDT-5m.csv.gz"
    stored.parent.mkdir(parents=True)
    stored.write_bytes(gzip.compress(b"garbage,x\n"))
    code, err = import_text(tmp_path, row(T0_MS), capsys)
    assert code == 78 and str(stored) in err and "Traceback" not in err
    assert gzip.decompress(stored.read_bytes()) == b"garbage,x\n"
    assert sorted(p.name for p in stored.parent.iterdir()) == ["BTCUSDT-5m.csv.gz"]


def test_an_out_that_is_a_file_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "out").write_text("mine\n")
    code, err = import_text(tmp_path, row(T0_MS), capsys)
    assert code == 78 and "cannot write into" in err and "Traceback" not in err
    assert (tmp_path / "out").read_text() == "mine\n"


def test_a_source_that_is_missing_a_directory_or_a_device_is_refused_saying_which(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "folder.csv").mkdir()
    for source, said in (
        (tmp_path / "missing.csv", "no such file"),
        (tmp_path / "folder.csv", "not a regular file (a directory, FIFO or device)"),
        (Path("/dev/null"), "not a regular file (a directory, FIFO or device)"),
    ):
        code = main(["data", "import", str(source), "--out", str(tmp_path / "out")])
        err = capsys.readouterr().err
        assert code == 78 and f"{source}: {said}" in err, err
    assert not (tmp_path / "out").exists()


TIMES = st.one_of(
    st.integers(0, 30).map(lambda i: str(T0_MS + i * BAR_MS)),
    st.integers(0, 30).map(lambda i: str((T0_MS + i * BAR_MS) * 1000)),  # microseconds
    st.sampled_from(["", "abc", f"{T0_MS}.5", "9" * 23, "1740787200", "-1", "nan", str(T0_MS + 7)]),
)
PRICES = st.one_of(
    st.sampled_from(["", "nan", "inf", "-1", "0", "abc", "99", "100", "101"]),
    st.floats(0.5, 200.0).map(repr),
)


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.lists(st.tuples(TIMES, PRICES, PRICES, PRICES, PRICES, PRICES), max_size=6))
def test_an_archive_is_refused_or_stored_as_replay_loads_it(
    tmp_path_factory: pytest.TempPathFactory, rows: list[tuple[str, ...]]
) -> None:
    folder = tmp_path_factory.mktemp("import")
    source = folder / f"{NAME}.csv"
    source.write_text("".join(",".join(r) + ",0,1,7,0.5,0.5,0\n" for r in rows))
    try:
        parsed = read_archive_file(source)
    except MalformedDataError:
        return
    store_klines(parsed.frame, parsed.ticker, parsed.interval, folder / "out")
    loaded = load_klines("BTC/USDT", "5m", folder / "out")  # raises if replay would refuse it
    assert (loaded.index.to_numpy() % BAR_MS == 0).all()


def damaged_zip(path: Path, damage: str) -> Path:
    """A one-member zip, then: ``encrypted`` sets the password flag, ``method`` names compression
    method 99, ``deflate`` scrambles the compressed bytes (headers and CRC left as they were)."""
    text = "".join(row(T0_MS + i * BAR_MS) for i in range(200))
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(f"{NAME}.csv", text)
    data = bytearray(path.read_bytes())
    local, central = data.find(b"PK\x03\x04"), data.find(b"PK\x01\x02")
    if damage == "encrypted":
        data[local + 6] |= 1
        data[central + 8] |= 1
    elif damage == "method":
        data[local + 8 : local + 10] = data[central + 10 : central + 12] = struct.pack("<H", 99)
    else:
        start = local + 30 + len(f"{NAME}.csv")
        for i in range(start + 5, start + 60):
            data[i] ^= 0x5A
    path.write_bytes(bytes(data))
    return path


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        ("encrypted", "password required"),
        ("method", "compression method is not supported"),
        ("deflate", "while decompressing"),
    ],
)
def test_a_damaged_zip_is_refused_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: str, said: str
) -> None:
    source = damaged_zip(tmp_path / f"{NAME}.zip", damage)
    assert main(["data", "import", str(source), "--out", str(tmp_path / "out")]) == 78
    err = capsys.readouterr().err
    assert said in err and str(source) in err and "Traceback" not in err


def test_a_zip_of_many_csv_members_is_refused_in_a_short_line_of_escaped_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / f"{NAME}.zip"
    with zipfile.ZipFile(source, "w") as archive:
        archive.writestr("\x1b]0;owned\x07.csv", row(T0_MS))
        for i in range(5000):
            archive.writestr(f"{'x' * 100}-{i}.csv", "")
    assert main(["data", "import", str(source), "--out", str(tmp_path / "out")]) == 78
    err = capsys.readouterr().err
    assert str(source) in err and "5,001 CSV members" in err
    assert "\x1b" not in err and "\\x1b]0;owned\\x07.csv" in err
    assert len(err) < 2000
    assert not (tmp_path / "out").exists()


def test_an_oversized_member_is_named_escaped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(market.archive, "MAX_CSV_BYTES", 1000)
    zipped = tmp_path / f"{NAME}.zip"
    with zipfile.ZipFile(zipped, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("\x1b[2J.csv", "".join(row(T0_MS + i * BAR_MS) for i in range(40)))
    with pytest.raises(MalformedDataError, match="inflates to over") as refused:
        read_archive_file(zipped)
    assert "\x1b" not in str(refused.value)
