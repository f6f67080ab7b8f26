"""A Claude model id in the config is one word of visible characters: an empty id, or one with a
space copied in, was taken, and every call then failed as a model the API does not serve (the
rules decided all day). Such an id refuses to start (exit 78) naming the setting; an id of a
proxy's own shape is taken."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.errors import EXIT_REFUSE_TO_START
from runner.cli import main
from runner.config import load_settings

pytestmark = pytest.mark.usefixtures("own_config")


@pytest.mark.parametrize(
    ("toml", "named"),
    [
        ('[agent]\nmodel = ""\n', "agent.model"),
        ('[agent]\nmodel = "claude-sonnet-4-6 "\n', "agent.model"),
        ('[agent]\nfailover_models = ["claude-opus-4-6", ""]\n', "agent.failover_models.1"),
        ('[agent.tiers]\nroutine_model = "claude haiku"\n', "agent.tiers.routine_model"),
        ('[agent.debate.roles.bull]\nmodel = "claude-\\u0007"\n', "agent.debate.roles.bull.model"),
    ],
)
def test_a_model_id_that_is_not_one_visible_word_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], toml: str, named: str
) -> None:
    (tmp_path / "vigil.toml").write_text(toml)
    assert main(["config", "show"]) == EXIT_REFUSE_TO_START
    err = capsys.readouterr().err
    assert f"  {named} = " in err
    assert "a model id is one word of visible characters" in err


def test_ids_of_other_shapes_are_taken(tmp_path: Path) -> None:
    (tmp_path / "vigil.toml").write_text(
        '[agent]\nmodel = "anthropic.claude-sonnet-4-5-20250929-v1:0"\n'
        'failover_models = ["claude-opus-4-6@20260101"]\n'
    )
    agent = load_settings().agent
    assert agent.model == "anthropic.claude-sonnet-4-5-20250929-v1:0"
    assert agent.failover_models == ("claude-opus-4-6@20260101",)
