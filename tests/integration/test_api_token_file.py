"""``<state dir>/api_token`` as a person or a broken disk may leave it: read by ``vigil serve``
and ``vigil run`` for the API's token, and by ``vigil status`` to ask a running API. What is no
readable token refuses the start naming the file (exit 78); it is never a traceback, a hang, nor
replaced by a new token."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fakes.api_support import default_settings
from fakes.fifo import outcome_beside_fifo

from api.auth import TOKEN_FILE_NAME, read_token_file
from api.server import ENDPOINT_FILE_NAME
from core.errors import EXIT_REFUSE_TO_START, RefuseToStartError
from runner.api_wiring import api_token
from runner.cli import main
from runner.config import Settings


@pytest.fixture
def settings(tmp_path: Path) -> Iterator[Settings]:
    with default_settings(tmp_path) as defaults:
        yield defaults


def _folder(path: Path) -> None:
    path.mkdir()


def _not_utf8(path: Path) -> None:
    path.write_bytes(b"\xff\xfe token\n")


def _fifo(path: Path) -> None:
    os.mkfifo(path)


@pytest.mark.parametrize("broken", [_folder, _not_utf8, _fifo])
def test_a_token_file_that_cannot_be_read_refuses_the_start_naming_it(
    settings: Settings, capsys: pytest.CaptureFixture[str], broken: Callable[[Path], None]
) -> None:
    """A folder or a file not UTF-8 there was an IsADirectoryError or UnicodeDecodeError
    traceback; a FIFO hung the start before it said anything."""
    path = settings.state_dir / TOKEN_FILE_NAME
    broken(path)
    code = outcome_beside_fifo(lambda: main(["serve", "--port", "0"]), path)
    assert code == EXIT_REFUSE_TO_START
    err = capsys.readouterr().err
    assert str(path) in err and "Traceback" not in err
    assert (path.exists() and not path.is_file()) or path.read_bytes().startswith(b"\xff")


def test_status_with_a_token_file_not_utf8_says_the_api_needs_a_token(
    settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    """read_token_file caught OSError only: a UnicodeDecodeError was vigil status's traceback."""
    (settings.state_dir / TOKEN_FILE_NAME).write_bytes(b"\xff\xfe token\n")
    url = "http://127.0.0.1:9/"
    body = {"pid": os.getpid(), "url": url}
    (settings.state_dir / ENDPOINT_FILE_NAME).write_text(json.dumps(body))
    code = main(["status"])
    assert code in (0, 1)
    assert f"the API at {url} needs a token" in capsys.readouterr().out


@pytest.mark.parametrize("target", ["missing", "empty"])
def test_a_new_token_is_never_written_through_a_symlink(settings: Settings, target: str) -> None:
    """A symlink at api_token to no file (or to an empty one) was followed when the token was
    made: the new token was written wherever it pointed (a file others may read), 0600 or not.
    The start is now refused naming the file, and nothing is written."""
    elsewhere = settings.state_dir.parent / "shared" / "token"
    elsewhere.parent.mkdir()
    if target == "empty":
        elsewhere.touch()
    path = settings.state_dir / TOKEN_FILE_NAME
    path.symlink_to(elsewhere)
    with pytest.raises(RefuseToStartError, match=str(path)):
        api_token(settings)
    assert (elsewhere.read_bytes() if elsewhere.exists() else None) == (
        b"" if target == "empty" else None
    )
    assert path.is_symlink()


def test_a_token_read_through_a_symlink_refuses_the_start_naming_it(settings: Settings) -> None:
    """Making a token refused a symlink at api_token, but reading one followed it: a link to
    someone's non-empty file had its first line taken as the API's token (the daemon's API
    guarded by it, and ``vigil status`` sending it as a bearer token). Both refuse the link."""
    elsewhere = settings.state_dir.parent / "shared" / "notes.txt"
    elsewhere.parent.mkdir()
    elsewhere.write_text("a line of someone's file\n")
    path = settings.state_dir / TOKEN_FILE_NAME
    path.symlink_to(elsewhere)
    with pytest.raises(RefuseToStartError) as refused:
        api_token(settings)
    assert str(path) in str(refused.value) and "a symlink" in str(refused.value)
    assert read_token_file(settings.state_dir) is None
    assert path.is_symlink() and elsewhere.read_text() == "a line of someone's file\n"


def test_a_token_file_no_request_can_carry_refuses_the_start_naming_it(
    settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    """A token file holding a non-ASCII letter was served as the token, which no request's
    header carries as written: every request was refused as a wrong token."""
    path = settings.state_dir / TOKEN_FILE_NAME
    path.write_text("pässwort\n")
    assert main(["serve", "--port", "0"]) == EXIT_REFUSE_TO_START
    err = capsys.readouterr().err
    assert str(path) in err and "not visible ASCII" in err and "Traceback" not in err
    assert path.read_text() == "pässwort\n"  # someone's file: kept
