"""``VIGIL_SECRETS_DIR`` that is missing or a file, and a folder or FIFO at a secret's file, refuse
to start naming the path (exit 78). A missing folder was passed over and a folder or FIFO at
``anthropic_api_key`` taken as no key with a Python warning on stderr: the secrets went unread
without a word, and Claude's decisions fell back to the rules."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from core.errors import EXIT_REFUSE_TO_START
from runner.cli import main


@pytest.fixture(autouse=True)
def _no_host_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in list(os.environ):
        if name.upper().startswith("VIGIL_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)  # no vigil.toml


def _refusal(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], folder: Path
) -> str:
    monkeypatch.setenv("VIGIL_SECRETS_DIR", str(folder))
    assert main(["config", "show"]) == EXIT_REFUSE_TO_START
    return capsys.readouterr().err


def test_a_secrets_dir_that_does_not_exist_refuses_to_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _refusal(monkeypatch, capsys, tmp_path / "secrts")
    assert (
        err == f"vigil: refusing to start: VIGIL_SECRETS_DIR {tmp_path / 'secrts'} does not exist\n"
    )


def test_a_secrets_dir_that_is_a_file_refuses_to_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "secrets").write_text("sk-ant-...\n")
    err = _refusal(monkeypatch, capsys, tmp_path / "secrets")
    assert f"VIGIL_SECRETS_DIR {tmp_path / 'secrets'} is not a folder" in err


@pytest.mark.parametrize("name", ["anthropic_api_key", "BINANCE_API_SECRET", "vigil_api_token"])
@pytest.mark.parametrize("kind", ["folder", "fifo"])
def test_a_secret_that_is_not_a_file_refuses_to_start(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    name: str,
    kind: str,
) -> None:
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    if kind == "folder":
        (secrets / name).mkdir()
    else:
        os.mkfifo(secrets / name)
    err = _refusal(monkeypatch, capsys, secrets)
    assert f"secret file {secrets / name} is not a regular file" in err
    assert "Warning" not in err


def test_a_secrets_dir_with_a_key_file_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "anthropic_api_key").write_text("sk-ant-test\n")
    (secrets / "notes").mkdir()  # no secret's name: left alone
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("VIGIL_SECRETS_DIR", str(secrets))
    assert main(["config", "show"]) == 0
    assert '"anthropic_api_key": "**********"' in capsys.readouterr().out


def test_a_secret_file_past_the_bound_refuses_to_start_without_being_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A sparse file of a gigabyte was read whole (2.1 GB resident) as a key of NULs."""
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    with (secrets / "anthropic_api_key").open("wb") as handle:
        handle.truncate(1 << 30)
    err = _refusal(monkeypatch, capsys, secrets)
    assert (
        f"secret file {secrets / 'anthropic_api_key'} is 1,073,741,824 bytes, over the 65,536"
        in err
    )


@pytest.mark.parametrize(
    ("content", "where"),
    [
        (b"\xff\xfe\x00binary", "byte 0xff at position 0"),
        (b"sk-ant-\xc3", "byte 0xc3 at position 7"),
    ],
)
def test_a_secret_file_that_is_not_utf8_text_refuses_to_start_naming_it(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    content: bytes,
    where: str,
) -> None:
    """The settings' own read failed with a hint that lists in the environment must be JSON, and
    named the field, not the file."""
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "anthropic_api_key").write_bytes(content)
    err = _refusal(monkeypatch, capsys, secrets)
    assert err == (
        f"vigil: refusing to start: secret file {secrets / 'anthropic_api_key'} is not text "
        f"(UTF-8): {where}; a secret is the key's text (a binary file put there?)\n"
    )
