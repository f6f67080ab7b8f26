"""The market half of the composition: the ports bundle (where one daemon meets the outside
world) and the market path built on it."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any

from core.bus import EventBus
from core.clock import Clock
from derivatives.config import DerivativesConfig
from derivatives.liquidations import LiquidationWindow
from derivatives.monitor import ContextField
from market.aggregator import MultiTFAggregator
from market.ccxt_client import make_binanceusdm
from market.features import FeatureTracker
from market.history import CcxtCandleBackfill, OhlcvHistory
from market.listener import MarketListener
from market.ports import CandleBackfill, TickSource
from regime.fit_ahead import FitAhead
from regime.fit_pool import FitPool
from regime.tracker import Offload
from runner.config import BINANCE_UPDATE_MS, Settings

ContextFieldsFactory = Callable[
    [DerivativesConfig, LiquidationWindow | None], Sequence[ContextField]
]


@dataclass(frozen=True)
class Ports:
    """Where one daemon meets the outside world: the only part that differs between ``vigil run``
    (live Binance), ``vigil run --sim`` (the simulator on loopback) and ``vigil replay`` (the
    recording, in-process). Built by ``websocket_ports`` here and by
    ``runner.replay.ports.replay_ports``; everything else is built the same way from Settings.
    """

    exchange: Any  # OHLCV over REST: ccxt binanceusdm (Binance or the simulator), or the recording
    #: what publishes market.tick, given the backfill it may repair with and the newest known
    #: price per ticker (the seeded history's last close: the first frame's plausibility anchor)
    make_ticks: Callable[[CandleBackfill, Callable[[str], float | None]], TickSource]
    #: the websocket of the liquidation stream (live only: the simulator and the recording have none)
    liquidations_ws: tuple[str, str] | None = None
    sim_rest_url: str | None = None  # the simulator's REST: its order API and /fng/
    #: the outside-context sources (None: from settings, against the network or the simulator)
    context_fields: ContextFieldsFactory | None = None
    fit_offload: Offload = asyncio.to_thread  # how a regime fit leaves the event loop
    fit_ahead: FitAhead | None = None  # replay: regime fits computed ahead in a process pool
    fit_pool: FitPool | None = None  # where regime fits run (None: inline, in this process)
    #: replay: the analysts' process (``runner.desk_ahead``; None: the analysts run inline)
    analysts_pool: Executor | None = None
    memory: bool = True  # False: the agent's notes and the learner stay out of the snapshot
    live_orders: bool = False  # --live: the ccxt broker on real money (checked again there)
    #: the one source of every retry's and restart's jitter: fresh OS entropy live (instances
    #: must not retry in lockstep); seeded in replay, where a jittered wait moves the clock
    jitter: random.Random = field(default_factory=random.Random)


@dataclass
class MarketPath:
    exchange: Any  # ccxt binanceusdm (Binance or the simulator), or the recording in replay
    aggregator: MultiTFAggregator
    features: FeatureTracker
    backfill: CcxtCandleBackfill
    history: OhlcvHistory
    ticks: TickSource  # the websocket listener, or RecordedTicks in replay


def websocket_ports(
    settings: Settings,
    clock: Clock,
    bus: EventBus,
    ws_base_url: str,
    rest_url: str | None,
    *,
    ws_path: str = "/market/stream",
    simulator: bool = False,
    live_orders: bool = False,
    fit_offload: Offload = asyncio.to_thread,
    fit_pool: FitPool | None = None,
) -> Ports:
    """Live Binance (``simulator=False``) or the simulator: its websocket and its REST."""
    jitter = random.Random()  # fresh entropy: live instances must not reconnect in lockstep

    def listener(
        backfill: CandleBackfill, known_price: Callable[[str], float | None]
    ) -> MarketListener:
        return MarketListener(
            clock,
            bus,
            base_url=ws_base_url,
            tickers=settings.market.tickers,
            timeframes=settings.market.timeframes,
            backfill=backfill,
            silence_timeout_secs=settings.market.silence_timeout_secs,
            rotate_after_secs=settings.market.rotate_after_secs,
            reconnect_base_secs=settings.market.reconnect_base_secs,
            reconnect_cap_secs=settings.market.reconnect_cap_secs,
            path=ws_path,
            guard=settings.market.guard(
                feed_update_ms=settings.sim.update_interval_ms
                if settings.market.source == "sim"
                else BINANCE_UPDATE_MS
            ),
            reference_price=known_price,
            rng=jitter,
        )

    return Ports(
        exchange=make_binanceusdm(rest_url),
        make_ticks=listener,
        liquidations_ws=None if simulator else (ws_base_url, ws_path),
        sim_rest_url=rest_url if simulator else None,
        live_orders=live_orders,
        fit_offload=fit_offload,
        fit_pool=fit_pool,
        jitter=jitter,
    )


def build_market_path(settings: Settings, clock: Clock, bus: EventBus, ports: Ports) -> MarketPath:
    features = FeatureTracker()
    aggregator = MultiTFAggregator(bus, observers=[features])
    backfill = CcxtCandleBackfill(ports.exchange, clock=clock, rand=ports.jitter.random)
    history = OhlcvHistory(
        ports.exchange,
        clock,
        tickers=settings.market.tickers,
        days=settings.market.history_days,
        rand=ports.jitter.random,
    )
    ticks = ports.make_ticks(backfill, aggregator.last_price)
    return MarketPath(ports.exchange, aggregator, features, backfill, history, ticks)
