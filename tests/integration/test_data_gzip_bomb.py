"""A gzip bomb in a data dir (a few hundred kB of ``.csv.gz`` inflating past any data file): pandas
read the file whole, so ``vigil replay``, ``vigil sim`` and ``vigil data check`` exhausted memory
before anything was said. A data file inflating past ``DATA_FILE_MAX_BYTES`` (256 MiB; the
largest bundled file holds 6.7 MB) is now refused naming it: replay and sim refuse to start (exit
78), data check gives it an ERROR line.

Each command runs in a child process whose address space is capped: the old reader died there of
``MemoryError`` (a traceback) instead of taking the machine's memory."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes.capped_child import CLI, run_capped, write_gzip_bomb

from market.data_file import DATA_FILE_MAX_BYTES

_MEMORY_LIMIT = 3 << 29  # 1.5 GiB: the commands' imports fit, the bomb's rows do not
_HEADER = b"open_time_ms,open,high,low,close,volume\n"
_DAY = "2025-03-02"


def _plant_bomb(data_dir: Path) -> Path:
    path = data_dir / "binance-usdm" / "BTCUSDT-5m.csv.gz"
    path.parent.mkdir(parents=True)
    write_gzip_bomb(path, DATA_FILE_MAX_BYTES, b"0,0,0,0,0,0\n", head=_HEADER)
    return path


@pytest.mark.timeout(300)
@pytest.mark.parametrize("command", ["replay", "sim", "data check"])
def test_a_gzip_bomb_in_the_data_dir_is_refused_naming_it_within_bounded_memory(
    tmp_path: Path, command: str
) -> None:
    data_dir = tmp_path / "data"
    bomb = _plant_bomb(data_dir)
    env = {"VIGIL_STATE_DIR": str(tmp_path / "state"), "VIGIL_DATA_DIR": str(data_dir)}
    if command == "replay":
        argv = ["replay", "--from", _DAY, "--to", _DAY, "--out", str(tmp_path / "run")]
        argv += ["--tickers", "BTC/USDT"]
    elif command == "sim":
        argv = ["sim", "--port", "0"]
        env["VIGIL_MARKET__TICKERS"] = '["BTC/USDT"]'
    else:
        argv = ["data", "check", str(data_dir)]
    done = run_capped(CLI, *argv, limit_bytes=_MEMORY_LIMIT, timeout_secs=200, env=env)
    said = done.stdout + done.stderr
    assert "Traceback" not in said and "MemoryError" not in said, said[-3000:]
    assert str(bomb) in said or bomb.name in said, said[-3000:]
    assert "256 MiB" in said, said[-3000:]
    assert done.returncode == (1 if command == "data check" else 78), said[-3000:]
