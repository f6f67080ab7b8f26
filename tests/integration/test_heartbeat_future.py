"""A heartbeat file dated in the future (a clock stepped back, a restored backup, a touch): its
negative age was taken as fresh by ``vigil health``, ``vigil status``, ``/healthz`` and
``/api/status``, so a dead daemon looked alive until that time. Beyond a few seconds of clock
jitter it is not fresh, said as "heartbeat dated in the future"."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes.api_support import serve_api, write_state_dir
from fakes.heartbeat import write_beat

from runner.cli import main


def _state_dir(tmp_path: Path, ahead_secs: float) -> Path:
    state_dir = tmp_path / "state"
    write_state_dir(state_dir)
    write_beat(state_dir / "heartbeat", age_secs=-ahead_secs)
    return state_dir


def test_vigil_health_and_status_call_a_future_heartbeat_unhealthy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state_dir = _state_dir(tmp_path, ahead_secs=3600)
    assert main(["--state-dir", str(state_dir), "health"]) == 1
    assert "heartbeat dated in the future" in capsys.readouterr().out
    assert main(["--state-dir", str(state_dir), "status"]) == 1
    assert "heartbeat dated in the future" in capsys.readouterr().out


def test_a_heartbeat_a_second_ahead_is_clock_jitter_and_fresh(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state_dir = _state_dir(tmp_path, ahead_secs=1)
    assert main(["--state-dir", str(state_dir), "health"]) == 0, capsys.readouterr()


async def test_healthz_and_status_give_a_future_heartbeat_no_age(tmp_path: Path) -> None:
    state_dir = _state_dir(tmp_path, ahead_secs=3600)
    async with serve_api(state_dir) as api:
        code, health = await api.get("/healthz")
        _, status = await api.get("/api/status")
    assert code == 200 and isinstance(health, dict) and isinstance(status, dict)
    assert health["heartbeat_age_secs"] is None
    assert "heartbeat dated in the future" in health["heartbeat_unavailable"]
    assert status["heartbeat_age_secs"] is None
    assert "heartbeat dated in the future" in status["unavailable"]["heartbeat"]
