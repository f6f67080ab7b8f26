"""What a person or another program left at ``api.json`` when the API publishes its address
there: a symlink was followed, so the API wrote its address over the file the link named (and
removed the link when it stopped); a FIFO held the API's start until someone read it, on the
daemon's event loop. The address is now written to a fresh temporary name and renamed into
place: neither is opened, and what is there is replaced."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

from fakes.api_support import serve_api, write_state_dir
from fakes.fifo import outcome_beside_fifo_writer

from api.server import ENDPOINT_FILE_NAME

VICTIM = b'{"cash": 10000}\n'


async def test_a_symlink_at_the_endpoint_file_is_replaced_not_written_through(
    tmp_path: Path,
) -> None:
    state_dir = tmp_path / "state"
    write_state_dir(state_dir)
    victim = tmp_path / "paper_broker.json"
    victim.write_bytes(VICTIM)
    endpoint = state_dir / ENDPOINT_FILE_NAME
    endpoint.symlink_to(victim)
    async with serve_api(state_dir) as api:
        assert not endpoint.is_symlink()
        assert json.loads(endpoint.read_bytes()) == {"url": api.url, "pid": os.getpid()}
    assert victim.read_bytes() == VICTIM and not endpoint.exists()


def test_a_fifo_at_the_endpoint_file_does_not_hold_the_start(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    write_state_dir(state_dir)
    fifo = state_dir / ENDPOINT_FILE_NAME
    os.mkfifo(fifo)

    async def serve_once() -> str:
        async with serve_api(state_dir) as api:
            return api.url

    outcome = outcome_beside_fifo_writer(lambda: asyncio.run(serve_once()), fifo)
    assert isinstance(outcome, str) and outcome.startswith("http://127.0.0.1:"), outcome
    assert not fifo.exists()
