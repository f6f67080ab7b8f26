"""``vigil sweep --scheduler ADDRESS`` where no Dask scheduler answers: a closed port, an HTTP
server, a Dask worker, an address Dask cannot read. Each is refused before any run is submitted
(exit 78 naming the address), never a traceback and never a wait for ever (an HTTP server's port
kept ``distributed.Client`` waiting for a handshake that never came)."""

from __future__ import annotations

import importlib
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import dask
import pytest

from core.errors import RefuseToStartError
from runner.cli import main
from runner.sweep.scheduler import check_scheduler

GRID = 'periods = [["2025-03-01", "2025-03-01"]]\ntickers = [["BTC/USDT"]]\nmemory = [true]\n'
#: how long a probe may wait for an answer: the refusals below do not depend on its length
CONNECT = "2s"


@pytest.fixture(autouse=True)
def _short_connect_timeout() -> Iterator[None]:
    # distributed's defaults join dask's config when it is imported: inside the ``set``, they
    # would leave with it
    importlib.import_module("distributed")
    with dask.config.set({"distributed.comm.timeouts.connect": CONNECT}):
        yield


@pytest.fixture
def http_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"tcp://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def closed_port() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"tcp://127.0.0.1:{port}"


@pytest.fixture
def cluster() -> Iterator[Any]:
    """A real Dask scheduler and one worker, in this process, on loopback."""
    distributed = importlib.import_module("dask.distributed")
    with distributed.LocalCluster(
        n_workers=1, processes=False, protocol="tcp", host="127.0.0.1", dashboard_address=None
    ) as local:
        yield local


@pytest.mark.timeout(60)
@pytest.mark.parametrize("peer", ["http", "closed", "foo", "", "http://127.0.0.1:8786"])
def test_a_scheduler_address_where_no_scheduler_answers_is_refused(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    request: pytest.FixtureRequest,
    peer: str,
) -> None:
    fixtures = {"http": "http_server", "closed": "closed_port"}
    address = request.getfixturevalue(fixtures[peer]) if peer in fixtures else peer
    grid, out = tmp_path / "grid.toml", tmp_path / "out"
    grid.write_text(GRID)
    assert main(["sweep", str(grid), "--out", str(out), "--scheduler", address]) == 78
    err = capsys.readouterr().err
    assert f"--scheduler {address}: " in err and "Traceback" not in err
    assert not (out / "runs").exists()  # refused before anything was written or submitted


@pytest.mark.timeout(60)
def test_a_scheduler_is_taken_and_a_worker_is_not(cluster: Any) -> None:
    check_scheduler(cluster.scheduler_address)
    [worker] = cluster.workers.values()
    with pytest.raises(RefuseToStartError, match=r"not a Dask scheduler \('Worker'\)"):
        check_scheduler(worker.address)
