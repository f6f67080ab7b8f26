"""``vigil serve`` on an address it cannot listen on refuses to start (exit 78, naming the address)
instead of a traceback: a taken port, an address of another host, a name that does not resolve
or one too long to encode."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from core.errors import EXIT_REFUSE_TO_START
from runner.cli import main

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
