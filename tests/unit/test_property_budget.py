"""Every property test that names its example count names it through ``property_budget.examples``,
so that ``make test`` stays within its time and ``make fuzz`` runs each at least 1000."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from property_budget import DEEP_MIN, SUITE_MAX, examples

TESTS = Path(__file__).resolve().parents[1]
A_BARE_COUNT = re.compile(r"max_examples\s*=\s*[0-9]")


def test_no_test_names_a_bare_example_count() -> None:
    bare = [
        f"{path.relative_to(TESTS)}:{number}"
        for path in sorted(TESTS.rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if A_BARE_COUNT.search(line)
    ]
    assert bare == []


@pytest.mark.parametrize(
    ("profile", "wanted", "runs"),
    [
        ("vigil", 3000, SUITE_MAX),
        ("ci", 3000, SUITE_MAX),
        ("ci", 40, 40),
        ("deep", 300, DEEP_MIN),
        ("deep", 3000, 3000),
    ],
)
def test_the_count_by_profile(
    monkeypatch: pytest.MonkeyPatch, profile: str, wanted: int, runs: int
) -> None:
    monkeypatch.setenv("HYPOTHESIS_PROFILE", profile)
    assert examples(wanted) == runs
