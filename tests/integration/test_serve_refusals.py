"""``vigil serve`` on an address it cannot listen on refuses to start (exit 78, naming the address)
instead of a traceback: a taken port, an address of another host, a name that does not resolve
or one too long to encode."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest
from fastapi import FastAPI

from api.server import ENDPOINT_FILE_NAME, ApiServer
from core.errors import EXIT_REFUSE_TO_START, RefuseToStartError
from runner.cli import main
from state.daemon_lock import DaemonLock

TOKEN = "abcdefabcdefabcdefabcdefabcdef12"  # a non-loopback address needs one


@pytest.fixture
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("VIGIL_API_TOKEN", TOKEN)
    (tmp_path / "state").mkdir()
    return tmp_path / "state"


# no name that needs a resolver: the test would wait on the host's DNS
@pytest.mark.parametrize("host", ["192.0.2.1", "a" * 300])
def test_an_address_it_cannot_listen_on_refuses_to_start(
    state_dir: Path, capsys: pytest.CaptureFixture[str], host: str
) -> None:
    code = main(["--state-dir", str(state_dir), "serve", "--host", host, "--port", "0"])
    assert code == EXIT_REFUSE_TO_START
    assert f"the API cannot listen on {host}:0" in capsys.readouterr().err


def test_a_taken_port_refuses_to_start(state_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        code = main(["--state-dir", str(state_dir), "serve", "--port", str(port)])
    assert code == EXIT_REFUSE_TO_START
    assert f"127.0.0.1:{port}" in capsys.readouterr().err


def test_serve_and_a_daemon_never_share_a_state_dir(
    state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A daemon started on a folder ``vigil serve`` served took over its api.json, and serve's
    stop then deleted the daemon's: ``vigil status`` lost the daemon, and a run serve finished
    was listed failed. Serve holds the daemon's lock, so either one refuses while the other runs."""
    with DaemonLock(state_dir):  # a daemon running there
        code = main(["--state-dir", str(state_dir), "serve", "--port", "0"])
    assert code == EXIT_REFUSE_TO_START
    assert "another vigil (daemon, pid " in capsys.readouterr().err

    serving = DaemonLock(state_dir, holder="vigil serve")
    serving.acquire()
    try:
        with pytest.raises(RefuseToStartError, match=r"another vigil \(vigil serve, pid "):
            DaemonLock(state_dir).acquire()  # what run_daemon does first
    finally:
        serving.release()


def test_serve_leaves_an_api_json_that_is_not_its_own(tmp_path: Path) -> None:
    endpoint = tmp_path / ENDPOINT_FILE_NAME
    server = ApiServer(FastAPI(), "127.0.0.1", 0, tmp_path)
    endpoint.write_text(json.dumps({"url": "http://127.0.0.1:1", "pid": os.getpid() + 1}))
    server._unpublish()
    assert endpoint.exists()  # another process's
    endpoint.write_text(json.dumps({"url": "http://127.0.0.1:1", "pid": os.getpid()}))
    server._unpublish()
    assert not endpoint.exists()
