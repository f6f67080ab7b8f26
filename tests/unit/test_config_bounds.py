"""No setting holds infinity, NaN or a duration past 100 years: most fields bound one side only
(``gt=0``), so ``inf`` and ``1e308`` passed and the daemon died at start-up with a traceback
(``round(inf)`` turning seconds into milliseconds in the frame guard), or ran with a timeout that
could never fire. Now they refuse to start (exit 78) naming the field and the value."""

from __future__ import annotations

import os

import pytest
from fakes.host_settings import without_host_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_budget import examples
from pydantic import BaseModel

from core.errors import RefuseToStartError
from runner.config import Settings, load_settings
from runner.config_bounds import DURATION_MAX, unusable_numbers


def _number_paths(model: type[BaseModel], prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every float or int field of the settings tree reachable through models only."""
    out: list[tuple[str, ...]] = []
    for name, info in model.model_fields.items():
        kind = info.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            out += _number_paths(kind, (*prefix, name))
        elif kind in (float, int):
            out.append((*prefix, name))
    return out


DURATIONS = [p for p in _number_paths(Settings) if p[-1].endswith(tuple(DURATION_MAX))]
FLOATS = [p for p in _number_paths(Settings) if Settings.model_fields.get(p[0]) is not None]


@pytest.fixture(autouse=True)
def _no_host_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    without_host_settings(monkeypatch)


def _refusal_for(path: tuple[str, ...], value: str) -> str:
    variable = "VIGIL_" + "__".join(path).upper()
    os.environ[variable] = value
    try:
        with pytest.raises(RefuseToStartError) as info:
            load_settings()
    finally:
        del os.environ[variable]
    return str(info.value)


def test_the_defaults_hold_only_usable_numbers() -> None:
    assert len(DURATIONS) > 50  # the walk reaches the nested sections
    assert unusable_numbers(Settings()) == []


@settings(
    max_examples=examples(120),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(path=st.sampled_from(DURATIONS), value=st.sampled_from(["inf", "1e308", "nan", "1e20"]))
def test_an_endless_duration_refuses_to_start_naming_it(path: tuple[str, ...], value: str) -> None:
    message = _refusal_for(path, value)
    assert ".".join(path) in message or path[-1] in message  # a section's check names its field


@settings(
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(path=st.sampled_from(FLOATS))
def test_infinity_refuses_to_start_in_any_number(path: tuple[str, ...]) -> None:
    message = _refusal_for(path, "inf")
    assert ".".join(path) in message or path[-1] in message


def test_the_longest_durations_are_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VIGIL_MARKET__MAX_CLOCK_SKEW_SECS", str(DURATION_MAX["_secs"]))
    assert load_settings().market.max_clock_skew_secs == DURATION_MAX["_secs"]
