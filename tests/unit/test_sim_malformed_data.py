"""``vigil sim`` and ``vigil run --sim`` on a data dir with a malformed file (a bar that cannot
have traded, a funding rate outside -0.1 .. 0.1, a Fear & Greed value past 100) refuse to start
naming the file, exit 78, as replay does: a ``MalformedDataError`` escaped the simulator's start
as exit 1 with a traceback. (A refused start never serves, so the commands return here.)"""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest

from core.errors import EXIT_REFUSE_TO_START
from market.recorded import fear_greed_path, funding_path, kline_path, load_klines
from runner.cli import main

FIRST_MS = 1_740_528_000_000  # 2025-02-26
END_MS = 1_741_046_400_000  # 2025-03-04


def _data_dir(root: Path, broken: str) -> Path:
    five = load_klines("BTC/USDT", "5m")
    five = five[(five.index >= FIRST_MS) & (five.index < END_MS)].copy()
    if broken == "klines":
        five.loc[five.index[10], "high"] = 1.0  # under its low
    path = kline_path("BTC/USDT", "5m", root)
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as out:
        five.to_csv(out, index_label="open_time_ms", float_format="%.10g")
    rate = "0.5" if broken == "funding" else "0.0001"
    with gzip.open(funding_path("BTC/USDT", root), "wt") as out:
        out.write(f"funding_time_ms,funding_rate\n{FIRST_MS},{rate}\n")
    fear_greed_path(root).parent.mkdir(parents=True)
    if broken == "fear_greed":
        fear_greed_path(root).write_text("timestamp_s,value,classification\n1740528000,150,Greed\n")
    else:
        shutil.copy(fear_greed_path(), fear_greed_path(root))
    return root


@pytest.mark.parametrize("command", [["sim", "--port", "0", "--rest-port", "0"], ["run", "--sim"]])
@pytest.mark.parametrize(
    ("broken", "named"),
    [
        ("klines", "BTCUSDT-5m.csv.gz"),
        ("funding", "BTCUSDT-funding.csv.gz"),
        ("fear_greed", "fear-greed-daily.csv"),
    ],
)
def test_a_malformed_file_refuses_the_simulator_naming_it(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    command: list[str],
    broken: str,
    named: str,
) -> None:
    monkeypatch.setenv("VIGIL_DATA_DIR", str(_data_dir(tmp_path / "data", broken)))
    monkeypatch.setenv("VIGIL_MARKET__TICKERS", '["BTC/USDT"]')
    monkeypatch.setenv("VIGIL_SIM__START", "2025-03-02T00:00:00Z")
    code = main(["--state-dir", str(tmp_path / "state"), *command])
    err = capsys.readouterr().err
    assert code == EXIT_REFUSE_TO_START, err[-2000:]
    assert named in err and "Traceback" not in err
