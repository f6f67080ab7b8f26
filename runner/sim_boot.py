"""Where the daemon's market comes from: the built-in simulator (its scaled clock and loopback
exchange) or Binance's websocket. Split from ``runner.app`` so the composition reads as one list."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from core.clock import Clock, WallClock
from core.scaled_clock import ScaledClock
from runner.config import Settings
from runner.sim_start import resumed_start_ms
from runner.supervisor import ShutdownHook
from runner.warmup import look_back_window
from sim.start_span import refuse_outside_recording

log = logging.getLogger(__name__)

#: given the clock and the simulator's websocket base URL, start something in front of it and
#: return the URL the listener connects to instead (the hostile-frame fuzz's man in the middle)
WsFront = Callable[[Clock, str], Awaitable[str]]


@dataclass(frozen=True)
class DaemonClock:
    clock: Clock
    scaled: ScaledClock | None  # set when the simulator drives time
    feed: Any = None  # sim.feed.SimFeed; loaded once, shared by the clock's start and the exchange


def daemon_clock(settings: Settings) -> DaemonClock:
    """Wall time live; against the simulator a scaled clock that resumes where the state dir left
    off (``runner.sim_start``)."""
    if settings.market.source != "sim":
        return DaemonClock(WallClock(), None)
    from sim.feed import serving_feed

    requested_ms = settings.sim.start_ms
    start_ms = resumed_start_ms(
        requested_ms, settings.runner_state_path, settings.logs_dir / "decisions.jsonl"
    )
    feed = serving_feed(
        settings.market.tickers,
        data_dir=settings.data_dir,
        update_interval_ms=settings.sim.update_interval_ms,
        what="market.tickers",
        start_ms=start_ms,
        first_ms=look_back_window(settings.market.history_days, start_ms, start_ms)[
            0
        ],  # what its warm-up reads
    )
    refuse_outside_recording(start_ms, requested_ms, feed)
    scaled = ScaledClock(start_ms, settings.sim.speed)
    return DaemonClock(scaled, scaled, feed)


@dataclass(frozen=True)
class MarketEndpoints:
    ws_base: str
    ws_path: str
    rest_url: str | None
    sim: Any = None  # sim.exchange.SimExchange when the simulator serves the market


async def market_endpoints(
    settings: Settings,
    time: DaemonClock,
    closers: list[tuple[str, ShutdownHook]],
    ws_front: WsFront | None = None,
) -> MarketEndpoints:
    """Binance's URLs live; against the simulator, starts it (and registers its stop in
    ``closers``) and returns its loopback URLs."""
    if time.scaled is None:
        ws_base, ws_path = split_ws_url(settings.market.binance_ws_url)
        return MarketEndpoints(ws_base, ws_path, None)
    from sim.exchange import SimExchange

    with time.scaled.hold():  # starting the simulator takes wall seconds: not simulated hours
        sim = SimExchange(
            time.clock,
            settings.market.tickers,
            data_dir=settings.data_dir,
            update_interval_ms=settings.sim.update_interval_ms,
            feed=time.feed,
        )
        await sim.start()
    closers.append(("stop simulator", sim.stop))
    closers.append(("stop the simulated clock's stall watch", _watch_stalls(time.scaled)))
    ws_base = sim.ws_base_url
    if ws_front is not None:
        ws_base = await ws_front(time.clock, ws_base)
    log.info(
        "simulator on %s (ws) and %s (REST), %sx from %s",
        ws_base,
        sim.rest_url,
        settings.sim.speed,
        datetime.fromtimestamp(time.clock.now_ms() / 1000, tz=UTC).isoformat(),
    )
    return MarketEndpoints(ws_base, "/market/stream", sim.rest_url, sim)


def _watch_stalls(clock: ScaledClock) -> ShutdownHook:
    """Start counting process stalls out of simulated time (``ScaledClock.absorb_stalls``) and
    return the hook that stops it and says how much was left out."""
    watch = asyncio.get_running_loop().create_task(clock.absorb_stalls(), name="sim clock stalls")

    async def stop() -> None:
        watch.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watch
        if clock.stalls:
            log.info(
                "simulated time left out %d stall%s of this process (%.2f s of real time)",
                clock.stalls,
                "" if clock.stalls == 1 else "s",
                clock.stalled_secs,
            )

    return stop


def split_ws_url(url: str) -> tuple[str, str]:
    """``wss://host/market/stream`` -> (``wss://host``, ``/market/stream``)."""
    scheme, _, rest = url.partition("://")
    host, _, path = rest.partition("/")
    return f"{scheme}://{host}", "/" + (path or "stream")
