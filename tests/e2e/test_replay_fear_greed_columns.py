"""``vigil replay --data-dir``: a Fear & Greed file without its value column is refused with exit
78 naming it. ``load_fear_greed`` checked for the classification column only, so the missing value
column was a KeyError traceback (exit 1) from the off-scale check."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from replay_support import day_start_ms

from market.recorded import MalformedDataError, load_fear_greed, load_klines

DAY = "2025-03-02"
REPO = Path(__file__).resolve().parents[2]


def test_load_fear_greed_refuses_a_file_without_values(tmp_path: Path) -> None:
    fng = tmp_path / "alternative-me" / "fear-greed-daily.csv"
    fng.parent.mkdir()
    fng.write_text("timestamp_s,classification\n1740787200,Fear\n")
    with pytest.raises(MalformedDataError, match=str(fng)):
        load_fear_greed(tmp_path)


def test_replay_refuses_it_with_78_naming_it(tmp_path: Path) -> None:
    klines = tmp_path / "data" / "binance-usdm"
    klines.mkdir(parents=True)
    bars = load_klines("BTC/USDT", "5m").loc[day_start_ms(DAY) : day_start_ms("2025-03-03") - 1]
    bars.to_csv(klines / "BTCUSDT-5m.csv.gz")
    fng = tmp_path / "data" / "alternative-me" / "fear-greed-daily.csv"
    fng.parent.mkdir()
    fng.write_text("timestamp_s,classification\n1740873600,Fear\n")
    span = ["--from", DAY, "--to", DAY, "--out", str(tmp_path / "run"), "--tickers", "BTC/USDT"]
    result = subprocess.run(
        [sys.executable, "-m", "runner.cli", "replay", "--data-dir", str(tmp_path / "data"), *span],
        cwd=REPO,
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 78, result.stderr
    assert "Traceback" not in result.stderr
    assert str(fng) in result.stderr
