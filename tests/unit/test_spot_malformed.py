"""A malformed PAXG spot file (``binance-spot/PAXGUSDT-1h.csv.gz``: a bar that cannot have
traded) refuses ``vigil replay`` and ``vigil sim`` naming it, exit 78, as a malformed bar, funding
or Fear & Greed file does: it escaped both as a ``MalformedDataError``, exit 1 with a traceback.
(A missing one is still optional: the gold hedge is unavailable with the file named.)"""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from core.errors import EXIT_REFUSE_TO_START
from market.recorded import kline_path, load_klines
from runner.cli import main

FIRST_MS = 1_740_528_000_000  # 2025-02-26
END_MS = 1_741_046_400_000  # 2025-03-04
SPOT = "binance-spot/PAXGUSDT-1h.csv.gz"


def _data_dir(root: Path) -> Path:
    five = load_klines("BTC/USDT", "5m")
    five = five[(five.index >= FIRST_MS) & (five.index < END_MS)]
    path = kline_path("BTC/USDT", "5m", root)
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as out:
        five.to_csv(out, index_label="open_time_ms", float_format="%.10g")
    (root / SPOT).parent.mkdir(parents=True)
    with gzip.open(root / SPOT, "wt") as out:
        out.write("open_time_ms,open,high,low,close,volume\n1740873600000,1,0.5,2,1,1\n")
    return root


@pytest.mark.parametrize(
    "command",
    [
        ["replay", "--from", "2025-03-02", "--to", "2025-03-02", "--tickers", "BTC/USDT"],
        ["sim", "--port", "0", "--rest-port", "0"],
    ],
)
def test_a_malformed_spot_file_is_refused_naming_it(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    command: list[str],
) -> None:
    monkeypatch.setenv("VIGIL_DATA_DIR", str(_data_dir(tmp_path / "data")))
    monkeypatch.setenv("VIGIL_MARKET__TICKERS", '["BTC/USDT"]')
    monkeypatch.setenv("VIGIL_SIM__START", "2025-03-02T00:00:00Z")
    out = ["--out", str(tmp_path / "run")] if command[0] == "replay" else []
    code = main(["--state-dir", str(tmp_path / "state"), *command, *out])
    err = capsys.readouterr().err
    assert code == EXIT_REFUSE_TO_START, err[-2000:]
    assert "PAXGUSDT-1h.csv.gz" in err and "Traceback" not in err
