"""A TOML table or a ``VIGIL_A__B__C`` variable changes the fields it names and nothing else. A
section whose default is not its class's default was replaced whole: setting
``derivatives.funding.timeout_secs`` refused to start ("ttl_secs: Field required", each of the
eleven derivatives sources alike), and setting ``agent.debate.roles.bull.max_tokens`` silently reset
the bull's model from claude-haiku-4-5 to the decider's."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_budget import examples
from pydantic import BaseModel

from runner.config import Settings, load_settings

_LEAF = (bool, int, float, str)


def _leaves(model: BaseModel, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], object]]:
    """(path, value) of every plain field of the default settings reachable through models."""
    out: list[tuple[tuple[str, ...], object]] = []
    for name in type(model).model_fields:
        value = getattr(model, name)
        if isinstance(value, BaseModel):
            out += _leaves(value, (*prefix, name))
        elif isinstance(value, _LEAF) and len(prefix) >= 1:
            out.append(((*prefix, name), value))
    return out


DEFAULTS = Settings()
NESTED = _leaves(DEFAULTS)


pytestmark = pytest.mark.usefixtures("no_host_settings")


@settings(
    max_examples=examples(200),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(path=st.sampled_from([path for path, _ in NESTED]))
def test_one_nested_field_set_to_its_default_changes_nothing(path: tuple[str, ...]) -> None:
    defaults = Settings()  # with the suite's VIGIL_* variables (conftest) cleared
    value: object = defaults
    for name in path:
        value = getattr(value, name)
    variable = "VIGIL_" + "__".join(path).upper()
    os.environ[variable] = value if isinstance(value, str) else json.dumps(value)
    try:
        loaded = load_settings()
    finally:
        del os.environ[variable]
    assert loaded == defaults


def test_a_source_s_timeout_from_the_environment_keeps_its_ttl(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("VIGIL_DERIVATIVES__FUNDING__TIMEOUT_SECS", "5")
    funding = load_settings().derivatives.funding
    assert (funding.timeout_secs, funding.ttl_secs) == (5.0, DEFAULTS.derivatives.funding.ttl_secs)


def test_a_toml_table_keeps_the_fields_it_does_not_name_and_the_environment_wins(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "vigil.toml").write_text(
        "[agent.debate.roles.bull]\nmax_tokens = 999\n[derivatives.etf_flow]\ntimeout_secs = 7\n"
    )
    monkeypatch.setenv("VIGIL_DERIVATIVES__ETF_FLOW__TIMEOUT_SECS", "8")
    loaded = load_settings()
    bull = loaded.agent.debate.roles["bull"]
    assert bull.max_tokens == 999 and bull.model == DEFAULTS.agent.debate.roles["bull"].model
    assert loaded.derivatives.etf_flow.timeout_secs == 8.0
    assert loaded.derivatives.etf_flow.ttl_secs == DEFAULTS.derivatives.etf_flow.ttl_secs
