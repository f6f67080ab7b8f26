"""SimExchange: the whole simulated Binance USDⓈ-M exchange (websocket + REST) on loopback.

It composes one ``SimFeed`` with the websocket server (``sim.ws_server``) and the REST server
(``sim.rest_server``), all on the same ``Clock`` so the streams, REST klines and the daemon agree
on the simulated instant. ``run_standalone`` is the body of ``vigil sim``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from core.clock import Clock
from core.errors import RefuseToStartError
from core.scaled_clock import ScaledClock
from core.utc_text import iso_utc
from sim.faults import WsFaults
from sim.feed import SimFeed, serving_feed
from sim.start_span import refuse_outside_recording
from sim.ws_server import WsServer

if TYPE_CHECKING:
    from sim.rest_faults import RestFaults
    from sim.rest_server import RestServer

log = logging.getLogger(__name__)


class SimExchange:
    """Feed + websocket server + REST server, started and stopped together."""

    def __init__(
        self,
        clock: Clock,
        tickers: Sequence[str],
        *,
        data_dir: Path | None = None,
        host: str = "127.0.0.1",
        ws_port: int = 0,
        rest_port: int = 0,
        update_interval_ms: int = 250,
        feed: SimFeed | None = None,
    ) -> None:
        if feed is not None and feed.update_interval_ms != update_interval_ms:
            raise ValueError(
                f"feed updates every {feed.update_interval_ms} ms, not {update_interval_ms} ms"
            )
        self.clock = clock
        self.feed = feed or SimFeed(
            tickers, data_dir=data_dir, update_interval_ms=update_interval_ms
        )
        self._host = host
        self._rest_port = rest_port
        self._data_dir = data_dir
        self.ws = WsServer(clock, self.feed, host=host, port=ws_port)
        self._rest: RestServer | None = None

    async def start(self) -> None:
        # imported here so the websocket side stays usable on its own (and nothing heavy loads
        # before the exchange is actually built)
        from sim.rest_server import RestServer

        await self.ws.start()
        rest = RestServer(
            self.clock, self.feed, host=self._host, port=self._rest_port, data_dir=self._data_dir
        )
        try:
            await rest.start()
        except BaseException:
            await self.ws.stop()
            raise
        self._rest = rest

    async def stop(self) -> None:
        try:
            if self._rest is not None:
                await self._rest.stop()
                self._rest = None
        finally:
            await self.ws.stop()

    async def __aenter__(self) -> SimExchange:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    @property
    def ws_base_url(self) -> str:
        """``ws://127.0.0.1:PORT``; append ``/stream?streams=...`` or ``/ws/<stream>``."""
        return self.ws.url

    @property
    def rest_url(self) -> str:
        return self._require_rest().url

    @property
    def ws_faults(self) -> WsFaults:
        return self.ws.faults

    @property
    def rest_faults(self) -> RestFaults:
        return self._require_rest().faults

    def _require_rest(self) -> RestServer:
        if self._rest is None:
            raise RuntimeError("SimExchange not started")
        return self._rest


async def run_standalone(
    host: str,
    ws_port: int,
    rest_port: int,
    start_ms: int,
    speed: float,
    tickers: Sequence[str],
    update_interval_ms: int = 250,
    *,
    data_dir: Path | None = None,
    first_ms: int | None = None,
    on_ready: Callable[[SimExchange], object] | None = None,
) -> None:
    """Serve the simulated exchange at ``speed`` x from ``start_ms`` until cancelled, the bars
    from ``first_ms`` on (None: the recording's first; see ``serving_feed``).

    ``on_ready`` is called once both servers listen (tests use it to learn the ports). A ticker
    without recorded data and a port that cannot be bound refuse to start (they were tracebacks).
    """
    feed = serving_feed(
        tickers,
        data_dir=data_dir,
        update_interval_ms=update_interval_ms,
        what="the configured tickers",
        start_ms=start_ms,
        first_ms=first_ms,
    )
    refuse_outside_recording(start_ms, start_ms, feed)  # in dates: it said epoch milliseconds
    clock = ScaledClock(start_ms, speed)
    exchange = SimExchange(
        clock,
        feed.tickers,
        data_dir=data_dir,
        host=host,
        ws_port=ws_port,
        rest_port=rest_port,
        update_interval_ms=update_interval_ms,
        feed=feed,
    )
    try:
        await exchange.start()
    except OSError as exc:  # the port is taken, or out of this host's reach
        raise RefuseToStartError(
            f"the simulator cannot listen on {host} (websocket port {ws_port}, REST port "
            f"{rest_port}): {exc.strerror or exc}"
        ) from None
    try:
        log.info(
            "sim exchange up: websocket %s (e.g. %s/stream?streams=btcusdt@kline_15m), "
            "REST %s, %s x speed from %s, tickers %s",
            exchange.ws_base_url,
            exchange.ws_base_url,
            exchange.rest_url,
            speed,
            iso_utc(start_ms),
            ", ".join(tickers),
        )
        if on_ready is not None:
            on_ready(exchange)
        await asyncio.Event().wait()  # until cancelled
    finally:
        await exchange.stop()


__all__ = ["SimExchange", "run_standalone"]
