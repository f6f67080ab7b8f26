"""The two tables of the settings keyed by name, ``[prompt.class_chars]`` (a class of context's
character budget) and ``[memory.retrieval.role_weights]`` (an insight kind's weight), take the
names they know and the values their comments give. A misspelt key (``polcy``, ``persn``) was
taken and did nothing, the budget or weight meant left at its default, where any other unknown
setting refuses to start; a weight of -1 or 50 and a budget of -1 were taken too."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.errors import EXIT_REFUSE_TO_START
from runner.cli import main

pytestmark = pytest.mark.usefixtures("own_config")


@pytest.mark.parametrize(
    ("toml", "names"),
    [
        ("[prompt.class_chars]\npolcy = 100\n", "no class of context ['polcy']"),
        ("[prompt.class_chars]\nnotes = -1\n", "prompt.class_chars.notes = -1"),
        ("[memory.retrieval.role_weights]\npersn = 2.0\n", "no insight kind ['persn']"),
        ("[memory.retrieval.role_weights]\ndebate = -1\n", "role_weights.debate = -1"),
        ("[memory.retrieval.role_weights]\nperson = 50\n", "role_weights.person = 50"),
    ],
)
def test_a_key_or_value_the_table_does_not_know_refuses_to_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], toml: str, names: str
) -> None:
    config = tmp_path / "vigil.toml"
    config.write_text(toml)
    assert main(["--config", str(config), "config", "show"]) == EXIT_REFUSE_TO_START
    err = capsys.readouterr().err
    assert err.startswith("vigil: refusing to start: invalid configuration")
    assert names in err


def test_a_misspelt_key_in_the_environment_refuses_to_start(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VIGIL_PROMPT__CLASS_CHARS__SESION", "200")
    assert main(["config", "show"]) == EXIT_REFUSE_TO_START
    err = capsys.readouterr().err
    assert "prompt.class_chars = " in err and "no class of context ['sesion']" in err


def test_the_keys_it_knows_change_theirs_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "vigil.toml"
    config.write_text(
        "[prompt.class_chars]\nnotes = 0\n[memory.retrieval.role_weights]\nperson = 3.0\n"
    )
    assert main(["--config", str(config), "config", "show"]) == 0
    out = capsys.readouterr().out
    assert '"notes": 0' in out and '"policy": 1000' in out
    assert '"person": 3.0' in out and '"debate": 0.6' in out


def test_the_classes_it_takes_are_the_classes_the_prompt_budgets() -> None:
    from agent.prompt_budgets import CONTEXT_CLASSES
    from agent.prompt_context import RANK_CLASS

    assert set(RANK_CLASS.values()) == set(CONTEXT_CLASSES)
