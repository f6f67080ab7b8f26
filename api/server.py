"""The API's HTTP server: uvicorn on a socket vigil binds itself, run as a supervised loop.

vigil binds the socket (so a port in use is an ``OSError`` the supervisor logs and retries with
backoff, not uvicorn's ``sys.exit``), leaves the process's signals to the daemon (uvicorn would
install its own), and on cancellation asks uvicorn to stop gracefully within a bound. The URL it
listens on goes to ``<state dir>/api.json`` so ``vigil status`` finds a running daemon.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
from collections.abc import Generator
from pathlib import Path

import uvicorn
from fastapi import FastAPI

from core.jsonread import loads_json
from core.regular_file import read_regular_file
from state.atomic import atomic_write_bytes, remove_stale_tmp_files

log = logging.getLogger(__name__)

ENDPOINT_FILE_NAME = "api.json"
_ENDPOINT_FILE_MAX_BYTES = 64 * 1024
GRACEFUL_STOP_SECS = 2


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield  # the daemon owns SIGTERM / SIGINT


def bind(host: str, port: int) -> socket.socket:
    family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    sock = socket.create_server((host, port), family=family, reuse_port=False)
    # uvicorn writes a response's head and body apart: with Nagle on, the body waits for the
    # client's delayed ACK of the head, 40 ms a request (measured: 44 ms p50 for /healthz on
    # loopback). Accepted connections inherit this from the listening socket.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.set_inheritable(True)
    return sock


class ApiServer:
    def __init__(self, app: FastAPI, host: str, port: int, state_dir: Path | None = None) -> None:
        self._app = app
        self._host = host
        self._port = port
        self._endpoint_file = None if state_dir is None else state_dir / ENDPOINT_FILE_NAME
        self.url: str | None = None
        self.started = asyncio.Event()

    async def run(self) -> None:
        """Serve until cancelled (a supervised loop)."""
        sock = bind(self._host, self._port)
        host, port = sock.getsockname()[:2]
        shown = f"[{host}]" if ":" in host else host
        self.url = f"http://{shown}:{port}"
        config = uvicorn.Config(
            self._app,
            log_config=None,
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=GRACEFUL_STOP_SECS,
        )
        server = _Server(config)
        serving = asyncio.create_task(server.serve(sockets=[sock]), name="uvicorn")
        try:
            while not server.started:
                if serving.done():
                    serving.result()  # raises what stopped it
                    raise RuntimeError("the API server stopped during startup")
                await asyncio.sleep(0.01)  # uvicorn's own startup, in real time
            self._publish()
            self.started.set()
            log.info(self._started_line())
            await asyncio.shield(serving)
            raise RuntimeError("the API server stopped")
        finally:
            self.started.clear()
            self._unpublish()
            server.should_exit = True
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(serving, GRACEFUL_STOP_SECS + 1.0)
            sock.close()

    def _started_line(self) -> str:
        if self._endpoint_file is None:
            # the daemon's link for its API process (api_wiring): logged as "API on ..." beside
            # the operator's, its port passed for the API's (alone, when the API's was taken)
            return (
                f"the daemon's private API for its API process on {self.url} "
                "(not the operator's API: that is in api.json)"
            )
        return f"API on {self.url} (docs {self.url}/docs)"

    def _publish(self) -> None:
        if self._endpoint_file is not None:
            body = {"url": self.url, "pid": os.getpid()}
            # a fresh name renamed into place: opened by name, a symlink there was written
            # through and a FIFO held the start until someone read it
            data = (json.dumps(body) + "\n").encode()
            remove_stale_tmp_files(self._endpoint_file)  # one a crash left mid-publish
            atomic_write_bytes(self._endpoint_file, data, durable=False)

    def _unpublish(self) -> None:
        """Remove api.json when it is still this process's: another's (a daemon's beside a
        ``vigil serve``) is left, or ``vigil status`` lost the running daemon's API."""
        if self._endpoint_file is not None and _endpoint_pid(self._endpoint_file) == os.getpid():
            with contextlib.suppress(FileNotFoundError):
                self._endpoint_file.unlink()


def _endpoint_body(path: Path) -> dict[str, object]:
    """api.json's object ({} when there is none to read)."""
    try:  # a regular file only: a FIFO there waited for a writer (serve and status hung)
        # bounded: a few hundred bytes are written; one of a gigabyte (a crash's zeros) was read
        body = loads_json(read_regular_file(path, max_bytes=_ENDPOINT_FILE_MAX_BYTES)[1])
    except (OSError, ValueError):
        return {}
    return body if isinstance(body, dict) else {}


def _endpoint_pid(path: Path) -> object:
    return _endpoint_body(path).get("pid")


def read_endpoint(state_dir: Path) -> str | None:
    """The URL of the API a daemon on ``state_dir`` published, if its process still lives."""
    body = _endpoint_body(state_dir / ENDPOINT_FILE_NAME)
    pid, url = body.get("pid"), body.get("url")
    # what _publish writes: a pid of 0 or -1 signals a group or every process (always "alive"),
    # and one past pid_t was an OverflowError; a bool or a text was taken for a number
    if type(pid) is not int or not 0 < pid < 2**31 or not isinstance(url, str):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass  # alive, another user's
    return url


__all__ = ["ENDPOINT_FILE_NAME", "ApiServer", "bind", "read_endpoint"]
