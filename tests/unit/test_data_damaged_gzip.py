"""A ``.csv.gz`` whose deflate stream is damaged (a bad block, not a bad header or CRC, which gzip
itself names as an OSError): zlib's own ``zlib.error`` reached ``vigil data check``, ``import``,
``fetch`` and replay as a traceback. Each now names the file: an ERROR line, or a refusal."""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest

from market.recorded import MalformedDataError, load_funding, read_kline_file
from runner.cli import main
from runner.data.layout import read_existing

#: a gzip header, then a final deflate block of the reserved type 3 ("invalid block type")
DAMAGED = bytes.fromhex("1f8b08000000000000ff") + b"\x07" + bytes(16)


def damaged(data_dir: Path, name: str) -> Path:
    path = data_dir / "binance-usdm" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(DAMAGED)
    return path


def test_the_damaged_stream_is_zlibs_own_error_not_gzips() -> None:
    with pytest.raises(zlib.error):
        gzip.decompress(DAMAGED)


def test_check_gives_the_file_an_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    damaged(tmp_path, "BTCUSDT-5m.csv.gz")
    damaged(tmp_path, "BTCUSDT-funding.csv.gz")
    assert main(["data", "check", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "BTCUSDT-5m.csv.gz: ERROR unreadable" in out
    assert "BTCUSDT-funding.csv.gz: ERROR unreadable" in out


def test_import_into_it_is_refused_naming_it_and_keeps_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stored = damaged(tmp_path / "out", "BTCUSDT-5m.csv.gz")
    source = tmp_path / "BTCUSDT-5m-2025-03-01.csv"
    source.write_text("1740787200000,100,101,99,100.5,10\n")
    assert main(["data", "import", str(source), "--out", str(tmp_path / "out")]) == 78
    assert str(stored) in capsys.readouterr().err
    assert stored.read_bytes() == DAMAGED


def test_replay_and_fetch_readers_refuse_it_naming_it(tmp_path: Path) -> None:
    klines = damaged(tmp_path, "BTCUSDT-5m.csv.gz")
    funding = damaged(tmp_path, "BTCUSDT-funding.csv.gz")
    reads: list[Callable[[], object]] = [
        lambda: read_kline_file(klines),
        lambda: load_funding("BTC/USDT", tmp_path),
        lambda: read_existing(klines, "open_time_ms"),
        lambda: read_existing(funding, "funding_time_ms"),
    ]
    for read in reads:
        with pytest.raises(MalformedDataError, match="BTCUSDT-"):
            read()
