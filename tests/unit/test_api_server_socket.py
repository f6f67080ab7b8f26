"""The API's listening socket: connections it accepts have Nagle off (TCP_NODELAY).

uvicorn writes a response's head and its body apart; with Nagle on, the body waits for the
client's delayed ACK of the head, and every request takes 40 ms more (seen: /healthz 44 ms on
loopback, 0.2 ms without)."""

from __future__ import annotations

import socket

from api.server import bind


def test_accepted_connections_have_nagle_off() -> None:
    listener = bind("127.0.0.1", 0)
    try:
        with socket.create_connection(listener.getsockname()[:2], timeout=10) as client:
            accepted, _ = listener.accept()
            with accepted:
                assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
            assert client.fileno() >= 0
    finally:
        listener.close()
