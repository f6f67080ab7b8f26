"""The data-dir writer writes inside ``--out`` only: a link left at its temporary name (another
user's, or a person's) is replaced, never written through to the file it points at."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.cli import main


def test_a_link_at_the_temporary_name_is_not_written_through(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("mine\n")
    out = tmp_path / "out"
    (out / "binance-usdm").mkdir(parents=True)
    (out / "binance-usdm" / "BTCUSDT-5m.csv.gz.tmp").symlink_to(victim)
    source = tmp_path / "BTCUSDT-5m-2025-03-01.csv"
    source.write_text("1740787200000,100,101,99,100.5,10\n")
    assert main(["data", "import", str(source), "--out", str(out)]) == 0
    assert victim.read_text() == "mine\n"
    stored = out / "binance-usdm" / "BTCUSDT-5m.csv.gz"
    assert stored.is_file() and not stored.is_symlink()
    assert sorted(p.name for p in stored.parent.iterdir()) == ["BTCUSDT-5m.csv.gz"]
