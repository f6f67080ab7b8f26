"""``api.json`` (where a running daemon serves its API) as a person or a crash may leave it:
``vigil serve`` and ``vigil status`` read it to find a live API. Only a regular file naming a
live process by a positive pid is one: anything else is no API, never a hang, a traceback or a
daemon taken as running."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes.api_support import default_settings
from fakes.fifo import outcome_beside_fifo

from api.server import ENDPOINT_FILE_NAME, read_endpoint
from runner.cli import main
from runner.config import Settings
from runner.serve_cmd import build_serve

URL = "http://127.0.0.1:9/"


@pytest.fixture
def settings(tmp_path: Path) -> Iterator[Settings]:
    with default_settings(tmp_path) as defaults:
        yield defaults


# 0 and -1 are no process: os.kill(0, 0) signals the caller's group, os.kill(-1, 0) every
# process it may signal, and both succeed; 2**31 and beyond are no pid_t (OverflowError)
@pytest.mark.parametrize("pid", [0, -1, -4242, 2**31, 10**20, True, "1", 1.0, None])
def test_a_pid_that_is_no_process_is_no_api(settings: Settings, pid: object) -> None:
    (settings.state_dir / ENDPOINT_FILE_NAME).write_text(json.dumps({"pid": pid, "url": URL}))
    assert read_endpoint(settings.state_dir) is None
    server, _runs = build_serve(settings)  # refused before: "the daemon ... already serves"
    assert server.url is None


def test_a_url_that_is_no_text_is_no_api(settings: Settings) -> None:
    body = {"pid": os.getpid(), "url": {"host": "127.0.0.1"}}
    (settings.state_dir / ENDPOINT_FILE_NAME).write_text(json.dumps(body))
    assert read_endpoint(settings.state_dir) is None


def test_a_live_pid_and_a_url_are_the_api(settings: Settings) -> None:
    body = {"pid": os.getpid(), "url": URL}
    (settings.state_dir / ENDPOINT_FILE_NAME).write_text(json.dumps(body))
    assert read_endpoint(settings.state_dir) == URL


def test_a_fifo_in_place_of_the_endpoint_file_blocks_no_command(
    settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    """Read with a plain open, a FIFO there waited for a writer: vigil status and vigil serve
    hung before saying anything."""
    fifo = settings.state_dir / ENDPOINT_FILE_NAME
    os.mkfifo(fifo)
    code = outcome_beside_fifo(lambda: main(["status"]), fifo)
    assert code in (0, 1)
    assert "no daemon API is serving this state dir" in capsys.readouterr().out
    served = outcome_beside_fifo(lambda: build_serve(settings), fifo)
    assert isinstance(served, tuple), served
