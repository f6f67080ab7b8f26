"""A setting given nan or infinity where the field has a bound is refused saying it must be a
finite number. The bound's own message misled: ``VIGIL_SIM__SPEED=nan`` "should be less than or
equal to 100000", ``-inf`` "greater than 0"; a number out of bounds keeps the bound's message."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.errors import EXIT_REFUSE_TO_START
from runner.cli import main

pytestmark = pytest.mark.usefixtures("own_config")


def _said(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main([*args, "config", "show"]) == EXIT_REFUSE_TO_START
    return capsys.readouterr().err


@pytest.mark.parametrize("text", ["nan", "inf", "-inf", "1e400", "NaN"])
def test_a_non_finite_number_in_the_environment_is_said_so(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], text: str
) -> None:
    monkeypatch.setenv("VIGIL_SIM__SPEED", text)
    assert f"sim.speed = {text!r}: must be a finite number" in _said(capsys)


@pytest.mark.parametrize("toml", ["nan", "inf", "-inf", "1e400"])
def test_a_non_finite_number_in_the_toml_file_is_said_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], toml: str
) -> None:
    config = tmp_path / "vigil.toml"
    config.write_text(f"[sim]\nspeed = {toml}\n[broker]\nslippage_pct = {toml}\n")
    err = _said(capsys, "--config", str(config))
    assert "sim.speed = " in err and "broker.slippage_pct = " in err
    assert err.count(": must be a finite number") == 2 and "Input should be" not in err


@pytest.mark.parametrize(
    ("name", "text", "said"),
    [
        ("VIGIL_SIM__SPEED", "5e6", "Input should be less than or equal to 100000"),
        ("VIGIL_SIM__SPEED", "-1", "Input should be greater than 0"),
        ("VIGIL_API__PORT", "9" * 500, "Input should be less than or equal to 65535"),
    ],
)
def test_a_finite_number_out_of_bounds_keeps_the_bounds_message(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    name: str,
    text: str,
    said: str,
) -> None:
    monkeypatch.setenv(name, text)
    assert said in _said(capsys)
