"""The suite's Hypothesis profile (tests/conftest.py): fresh examples locally, fixed ones in CI."""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import settings

REPO = Path(__file__).resolve().parents[2]


def test_the_profile_follows_the_environment() -> None:
    in_ci = os.environ.get("HYPOTHESIS_PROFILE") == "ci"
    current = settings.default
    assert current is not None
    assert current.derandomize is in_ci
    assert current.deadline is None  # a loaded machine must not fail a correct test


def test_ci_runs_derandomized() -> None:
    assert settings.get_profile("ci").derandomize is True
    assert settings.get_profile("ci").deadline is None
    assert "export HYPOTHESIS_PROFILE=ci" in (REPO / ".ci" / "run").read_text()


def test_deep_is_the_default_profile_with_more_examples() -> None:
    deep, vigil = settings.get_profile("deep"), settings.get_profile("vigil")
    assert deep.max_examples == 1000 > vigil.max_examples
    assert deep.deadline is None and deep.derandomize is False
    assert "HYPOTHESIS_PROFILE=deep" in (REPO / "Makefile").read_text()
