"""pyproject.toml names the project's packages twice: the ones the wheel ships (setuptools'
``include``) and the ones import-linter layers (``root_packages``, which ``make compile`` also
precompiles). A package added to the first only would ship unlayered and be compiled again in
every process; one added to the second only would be layered and never shipped."""

from __future__ import annotations

import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_every_shipped_package_is_layered_and_compiled_and_no_other() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]
    shipped = {
        pattern.rstrip("*") for pattern in config["setuptools"]["packages"]["find"]["include"]
    }
    layered = config["importlinter"]["root_packages"]
    assert len(layered) == len(set(layered)), layered
    assert sorted(shipped ^ set(layered)) == []
    assert all((REPO / package / "__init__.py").is_file() for package in layered)
