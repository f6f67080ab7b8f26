"""``ANTHROPIC_API_KEY_FILE`` naming a file that holds no usable key refuses the start (exit 78)
with the setting named: it raised a traceback out of the wiring (a missing file, bytes that are
not UTF-8), or made every Claude call fail (two lines, a space). A key saved with a UTF-8 BOM is
read without it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fakes.daemon import daemon_env, refused_sim_start
from fakes.fifo import outcome_beside_fifo

from core.errors import RefuseToStartError
from runner.agent_wiring import anthropic_key_reader, build_client
from runner.config import Settings

pytestmark = pytest.mark.timeout(120)

KEY = "sk-ant-api03-file-key-444"


@pytest.mark.parametrize(
    "content",
    [None, b"\xff\xfe\x00s\x00k", f"{KEY}\nsk-ant-api03-next-555\n".encode()],
    ids=["missing", "not-utf8", "two-lines"],
)
def test_a_key_file_without_a_usable_key_refuses_naming_the_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: bytes | None
) -> None:
    key_file = tmp_path / "anthropic_api_key"
    if content is not None:
        key_file.write_bytes(content)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY_FILE", str(key_file))
    with pytest.raises(RefuseToStartError, match="ANTHROPIC_API_KEY_FILE") as refused:
        build_client(Settings(), clock=None)  # type: ignore[arg-type]
    assert KEY not in str(refused.value)


def test_a_key_saved_with_a_byte_order_mark_is_read_without_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key_file = tmp_path / "anthropic_api_key"
    key_file.write_bytes(b"\xef\xbb\xbf" + KEY.encode() + b"\r\n")
    monkeypatch.setenv("ANTHROPIC_API_KEY_FILE", str(key_file))
    assert anthropic_key_reader("")() == KEY


@pytest.mark.parametrize("content", [None, b"\xff\xfe\x00s\x00k"], ids=["missing", "not-utf8"])
def test_the_daemon_refuses_with_exit_78(tmp_path: Path, content: bytes | None) -> None:
    key_file = tmp_path / "anthropic_api_key"
    if content is not None:
        key_file.write_bytes(content)
    stderr = refused_sim_start(daemon_env(tmp_path / "state", ANTHROPIC_API_KEY_FILE=str(key_file)))
    assert "ANTHROPIC_API_KEY_FILE" in stderr


def _not_a_key_file(key_file: Path, kind: str) -> None:
    if kind == "fifo":
        os.mkfifo(key_file)
    elif kind == "folder":
        key_file.mkdir()
    else:  # sparse: gigabytes that cost no disk
        with key_file.open("wb") as handle:
            handle.truncate(2 << 30)


@pytest.mark.parametrize("kind", ["fifo", "folder", "huge"])
def test_a_key_path_that_is_not_a_small_file_refuses_naming_the_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """``read_text`` blocked on a FIFO until someone wrote to it, and read a huge file whole."""
    key_file = tmp_path / "anthropic_api_key"
    _not_a_key_file(key_file, kind)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY_FILE", str(key_file))
    outcome = outcome_beside_fifo(lambda: build_client(Settings(), clock=None), key_file)  # type: ignore[arg-type]
    assert isinstance(outcome, RefuseToStartError), outcome
    assert "ANTHROPIC_API_KEY_FILE" in str(outcome)
    assert ("over the" if kind == "huge" else "not a regular file") in str(outcome)


def test_the_daemon_refuses_a_fifo_with_exit_78(tmp_path: Path) -> None:
    """The start hung on the FIFO (a hang guard's timeout here: it does not wait otherwise)."""
    key_file = tmp_path / "anthropic_api_key"
    os.mkfifo(key_file)
    stderr = refused_sim_start(daemon_env(tmp_path / "state", ANTHROPIC_API_KEY_FILE=str(key_file)))
    assert "ANTHROPIC_API_KEY_FILE" in stderr and "not a regular file" in stderr
    assert key_file.is_fifo()
