"""``vigil sim`` and ``vigil run --sim`` refuse what they cannot serve instead of a traceback, and
use every setting they are given: ``--update-interval-ms 0`` was silently 250 (``0 or 250``), a
cadence that does not divide a bar and a port over 65535 were tracebacks, ``data_dir`` was
ignored by ``vigil sim`` (it served the bundled data), and a ticker without recordings stopped
``vigil run --sim`` with a traceback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fakes.host_settings import without_host_settings
from hypothesis import given
from hypothesis import strategies as st

from core.errors import EXIT_REFUSE_TO_START
from runner.cli import EXIT_USAGE, main


@pytest.fixture(autouse=True)
def _no_host_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    without_host_settings(monkeypatch)


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """What ``vigil sim`` would serve: ``run_standalone``'s arguments, without serving."""
    calls: list[dict[str, Any]] = []

    async def run_standalone(**kwargs: Any) -> None:
        calls.append(kwargs)

    monkeypatch.setattr("sim.exchange.run_standalone", run_standalone)
    return calls


@given(port=st.one_of(st.integers(max_value=-1), st.integers(min_value=65536)))
def test_a_port_out_of_range_is_a_usage_error(port: int) -> None:
    for flag in ("--port", "--rest-port"):
        with pytest.raises(SystemExit) as info:
            main(["sim", flag, str(port)])
        assert info.value.code == EXIT_USAGE


def test_the_top_port_leaves_no_rest_port(
    served: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sim", "--port", "65535"]) == EXIT_USAGE
    assert "give --rest-port" in capsys.readouterr().err and not served


@pytest.mark.parametrize("interval", ["0", "7", "-250"])
def test_a_cadence_that_is_not_a_bar_divisor_refuses_to_start(
    served: list[dict[str, Any]], capsys: pytest.CaptureFixture[str], interval: str
) -> None:
    assert main(["sim", "--update-interval-ms", interval]) == EXIT_REFUSE_TO_START
    assert f"sim.update_interval_ms = {interval}" in capsys.readouterr().err and not served


def test_the_cadence_and_the_data_dir_reach_the_simulator(
    served: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("VIGIL_DATA_DIR", str(tmp_path))
    assert main(["sim", "--update-interval-ms", "1000", "--port", "9000"]) == 0
    (call,) = served
    assert call["update_interval_ms"] == 1000 and call["data_dir"] == tmp_path
    assert (call["ws_port"], call["rest_port"]) == (9000, 9001)


def test_run_sim_refuses_a_ticker_without_recordings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VIGIL_MARKET__TICKERS", '["BTC/USDT", "DOGE/USDT"]')
    assert main(["--state-dir", str(tmp_path), "run", "--sim"]) == EXIT_REFUSE_TO_START
    assert "no recorded 5m klines for DOGE/USDT" in capsys.readouterr().err
