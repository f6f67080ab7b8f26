"""``vigil serve`` at start reads two small files of the state dir: ``api.json`` (a running API's
address) and ``api_token``. Each was read whole, so one of a gigabyte (a crash's zeros, here a
sparse file) took that gigabyte before it was found to be no address or no token. At most a few
kB is read now: ``api.json`` past it is no running API, ``api_token`` past it refuses the start
naming the file (78), kept as it is.

``vigil serve`` runs in a child process whose address space is capped: the old read died there of
``MemoryError`` instead of taking the machine's memory."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes.capped_child import CLI, GIGABYTE, run_capped, sparse_size

from api.auth import TOKEN_FILE_NAME
from api.server import ENDPOINT_FILE_NAME
from core.errors import EXIT_REFUSE_TO_START

_MEMORY_LIMIT = 1 << 30


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", [ENDPOINT_FILE_NAME, TOKEN_FILE_NAME])
def test_a_gigabyte_file_is_not_read_whole_at_the_start(tmp_path: Path, name: str) -> None:
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    huge = state_dir / name
    sparse_size(huge, GIGABYTE)
    if name == ENDPOINT_FILE_NAME:  # and a token that cannot be read: serve refuses after api.json
        (state_dir / TOKEN_FILE_NAME).mkdir()
    argv = ["--state-dir", str(state_dir), "serve", "--port", "0"]
    done = run_capped(CLI, *argv, limit_bytes=_MEMORY_LIMIT)
    assert done.returncode == EXIT_REFUSE_TO_START, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert str(state_dir / TOKEN_FILE_NAME) in done.stderr, done.stderr[-3000:]
    assert huge.stat().st_size == GIGABYTE
