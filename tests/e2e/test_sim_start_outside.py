"""``vigil sim --start`` outside the recording: the refusal gave the instants as epoch
milliseconds (``sim start 1893456000000 ms is outside the recording of BTC/USDT
(1735603200000..1771520399999 ms)``), which ``vigil run --sim`` says in dates; both now name the
start and the recording's span as UTC dates, and the simulator's up line its start too."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from fakes.daemon import daemon_env, sim_exchange

REPO = Path(__file__).resolve().parents[2]


def test_a_start_outside_the_recording_is_refused_in_dates(tmp_path: Path) -> None:
    env = daemon_env(tmp_path / "state", VIGIL_MARKET__TICKERS='["BTC/USDT"]')
    done = subprocess.run(
        [sys.executable, "-m", "runner.cli", "sim", "--port", "0", "--rest-port", "0",
         "--start", "2030-01-01T00:00:00Z"],
        env=env, cwd=REPO, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 78
    assert done.stderr.splitlines() == [
        "vigil: refusing to start: sim start 2030-01-01T00:00:00Z is outside the recording of "
        "BTC/USDT, which covers 2024-12-31T00:00:00Z .. 2026-02-19T17:00:00Z; choose --start "
        "inside it"
    ]


def test_the_up_line_says_the_start_as_a_date(tmp_path: Path) -> None:
    env = daemon_env(
        tmp_path / "state",
        VIGIL_MARKET__TICKERS='["BTC/USDT"]',
        VIGIL_SIM__START="2025-03-02T00:00:00Z",
    )
    with sim_exchange(env, tmp_path / "sim.log") as proc:
        assert proc.poll() is None
    assert (
        "60.0 x speed from 2025-03-02T00:00:00Z, tickers BTC/USDT"
        in (tmp_path / "sim.log").read_text()
    )
