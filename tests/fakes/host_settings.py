"""A test of settings without the host's: no ``VIGIL_*`` variable from the shell that runs the
suite (``VIGIL_SECRETS_DIR`` is kept), and, when asked, the working directory a folder of the
test's own (no stray ``vigil.toml``) and an empty config file there that the test may write."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def without_host_settings(
    monkeypatch: pytest.MonkeyPatch, workdir: Path | None = None, *, own_config: bool = False
) -> None:
    for name in list(os.environ):
        if name.upper().startswith("VIGIL_") and name.upper() != "VIGIL_SECRETS_DIR":
            monkeypatch.delenv(name)
    if workdir is None:
        return
    monkeypatch.chdir(workdir)
    if own_config:
        (workdir / "vigil.toml").write_text("")
        # --config sets it for the process: set here first, so that it is undone after the test
        monkeypatch.setenv("VIGIL_CONFIG_FILE", str(workdir / "vigil.toml"))


@pytest.fixture
def no_host_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No host settings; the working directory is the test's own, with no ``vigil.toml``. The
    tests of settings use it (or ``own_config``) as ``pytestmark =
    pytest.mark.usefixtures("no_host_settings")``: a plugin of the suite (``tests/conftest.py``)."""
    without_host_settings(monkeypatch, tmp_path)


@pytest.fixture
def own_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No host settings; an empty ``vigil.toml`` of the test's own is the config file."""
    without_host_settings(monkeypatch, tmp_path, own_config=True)


__all__ = ["no_host_settings", "own_config", "without_host_settings"]
