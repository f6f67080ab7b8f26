"""A configured organisation policy that cannot be read refuses the start (exit 78), for the daemon
and for a replay: at start there is no last good policy to keep, and the daemon used to trade on
its own looser caps with a warning at each decision. A readable one starts as before."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from fakes.daemon import REPO, daemon_env

from core.errors import EXIT_REFUSE_TO_START, RefuseToStartError
from runner.wiring import _organisation_caps

pytestmark = pytest.mark.timeout(120)


def _broken_policies(tmp_path: Path) -> dict[str, Path]:
    not_toml = tmp_path / "not-toml"
    not_toml.mkdir()
    (not_toml / "policy.toml").write_text("max_position_pct = [never closed")
    loosening = tmp_path / "bad-field"
    loosening.mkdir()
    (loosening / "policy.toml").write_text('max_position_pct = "a lot"\n')
    return {"missing": tmp_path / "no-such-folder", "not TOML": not_toml, "bad field": loosening}


@pytest.mark.parametrize("case", ["missing", "not TOML", "bad field"])
def test_an_unreadable_policy_refuses_naming_the_setting(tmp_path: Path, case: str) -> None:
    with pytest.raises(
        RefuseToStartError, match=r"(?s)context\.organisation_path: .*could not apply"
    ):
        _organisation_caps(_broken_policies(tmp_path)[case])


def test_a_readable_policy_or_none_builds_the_caps(tmp_path: Path) -> None:
    folder = tmp_path / "org"
    folder.mkdir()
    (folder / "policy.toml").write_text("max_position_pct = 0.01\n")
    assert _organisation_caps(folder).config().max_position_pct == 0.01
    assert _organisation_caps(None).policy() is None


@pytest.mark.parametrize(
    "command",
    [
        ["run", "--sim"],
        ["replay", "--from", "2025-03-02", "--to", "2025-03-02", "--out", "RUN"],
    ],
)
def test_the_daemon_and_a_replay_refuse_with_exit_78(tmp_path: Path, command: list[str]) -> None:
    env = daemon_env(
        tmp_path / "state", VIGIL_CONTEXT__ORGANISATION_PATH=str(tmp_path / "no-such-folder")
    )
    argv = [arg.replace("RUN", str(tmp_path / "run")) for arg in command]
    done = subprocess.run(
        [sys.executable, "-m", "runner.cli", *argv],
        env=env,
        cwd=REPO,
        check=False,
        capture_output=True,
        text=True,
        timeout=100,
    )
    assert done.returncode == EXIT_REFUSE_TO_START, done.stderr
    assert "context.organisation_path" in done.stderr and "does not exist" in done.stderr
    assert "Traceback" not in done.stderr
