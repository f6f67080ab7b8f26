"""``vigil sim`` stopped as README stops vigil's processes: ``docker stop`` (SIGTERM) and a closing
terminal (SIGHUP) killed it on the spot (exit 143 / 129: its servers never closed, no line said
so), and Ctrl-C was exit 130. Each now stops its servers in order and exits 0, a normal stop, as
the daemon, ``vigil replay`` and ``vigil serve`` do."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from fakes.daemon import STOP_WAIT_SECS, daemon_env, sim_exchange


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=str)
def test_vigil_sim_stops_in_order_on_each_stop_signal(tmp_path: Path, sig: signal.Signals) -> None:
    env = daemon_env(
        tmp_path / "state",
        VIGIL_MARKET__TICKERS='["BTC/USDT"]',
        VIGIL_SIM__START="2025-03-02T00:00:00Z",
    )
    log = tmp_path / "sim.log"
    with sim_exchange(env, log) as proc:
        assert proc.poll() is None, log.read_text()[-3000:]
        proc.send_signal(sig)
        code = proc.wait(timeout=STOP_WAIT_SECS)
    text = log.read_text()
    assert code == 0, text[-3000:]
    assert "REST server on port" in text and "stopped" in text and "Traceback" not in text
