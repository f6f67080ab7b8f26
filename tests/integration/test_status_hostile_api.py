"""``vigil status`` against a server that is not vigil's API, named in the state dir's endpoint
file (a planted ``api.json``, or another program on the port a daemon left): an endless answer was
read whole into memory, and one dripped a byte at a time kept ``status`` waiting as long as it
dripped (the timeout was per socket read). Both are no answer now: ``status`` says why and shows
the state dir's files."""

from __future__ import annotations

import json
import os
import socket
import socketserver
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest
from fakes.api_support import write_state_dir

from api.server import ENDPOINT_FILE_NAME
from runner.config import Settings
from runner.status_cmd import ANSWER_MAX_BYTES, API_TIMEOUT_SECS, collect

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
#: how long a hostile server keeps at it before it gives up on its own (a bound for the test)
SERVER_GIVES_UP_SECS = 120.0


def _flood(conn: socket.socket) -> None:
    """A body far larger than any answer of vigil's, as fast as the client takes it."""
    total = 4 * ANSWER_MAX_BYTES
    conn.sendall(HEAD % total)
    block = b"0" * (1 << 20)
    for _ in range(total // len(block)):
        conn.sendall(block)


def _drip(conn: socket.socket) -> None:
    """A valid start, then one byte every 0.2 s: each socket read is well inside its timeout."""
    conn.sendall(HEAD % 1_000_000 + b"{")
    stop = time.monotonic() + SERVER_GIVES_UP_SECS
    while time.monotonic() < stop:
        conn.sendall(b" ")
        time.sleep(0.2)


@contextmanager
def hostile_server(answer: Callable[[socket.socket], None]) -> Iterator[int]:
    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            conn: socket.socket = self.request
            request = b""
            while b"\r\n\r\n" not in request and (data := conn.recv(4096)):
                request += data
            with suppress(OSError):  # the client hung up: what it should do
                answer(conn)

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def _state_dir_naming(tmp_path: Path, port: int, monkeypatch: pytest.MonkeyPatch) -> Path:
    state_dir = tmp_path / "state-dir"
    write_state_dir(state_dir, decisions=1)
    endpoint = {"pid": os.getpid(), "url": f"http://127.0.0.1:{port}"}
    (state_dir / ENDPOINT_FILE_NAME).write_text(json.dumps(endpoint))
    monkeypatch.setenv("VIGIL_API_TOKEN", "a-token")
    return state_dir


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (_flood, f"answered over {ANSWER_MAX_BYTES:,} bytes"),  # not held in memory
        (_drip, f"took over {API_TIMEOUT_SECS:g} s to answer"),  # the timeout is for the whole
    ],
    ids=["endless", "dripped"],
)
def test_an_answer_too_large_or_too_slow_is_none_and_the_files_are_shown(
    answer: Callable[[socket.socket], None],
    reason: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with hostile_server(answer) as port:
        view = collect(Settings(state_dir=_state_dir_naming(tmp_path, port, monkeypatch)))
    assert view.source == "state_dir"
    assert reason in view.unavailable["api"]
