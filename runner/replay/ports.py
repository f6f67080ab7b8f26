"""The replay's ports: the recording served in process where the live daemon touches the network.

Recorded ticks instead of the websocket listener, recorded OHLCV, the recorded derivatives context,
regime fits inline; ``runner.replay.build`` wires the daemon on them, and ``runner.prompt_cmd``
builds its offline snapshot on them too.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from concurrent.futures import Executor

from core.bus import EventBus
from core.clock import VirtualClock
from derivatives.config import DerivativesConfig
from derivatives.monitor import ContextField
from regime.fit_ahead import FitAhead
from regime.fit_pool import FitPool
from regime.tracker import run_inline
from runner.config import Settings
from runner.market_wiring import Ports
from runner.replay.data import optional_fear_greed
from sim.feed import SimFeed
from sim.inprocess import RecordedOhlcvExchange
from sim.recorded_sources import build_recorded_context_fields
from sim.recorded_spot import RecordedSpotKlines
from sim.recorded_ticks import RecordedTicks
from sim.rest_payloads import FearGreedBook


def replay_ports(
    settings: Settings,
    clock: VirtualClock,
    bus: EventBus,
    feed: SimFeed,
    *,
    end_ms: int,
    memory: bool = True,
    fear_greed: FearGreedBook | str | None = None,
    fit_ahead: FitAhead | None = None,
    fit_pool: FitPool | None = None,
    tick_pool: Executor | None = None,
    desk_pool: Executor | None = None,
) -> Ports:
    """The recording in-process: ticks, OHLCV and the recorded context; fits inline.
    ``fear_greed``: the opened index (or why there is none); None reads it from the data dir.
    ``tick_pool``: where the ticks' rows are computed ahead; None: in this process.
    ``desk_pool``: where the analysts run (``runner.desk_ahead``); None: in this process.
    The jitter of every retry is drawn from the replay's seed (``settings.regime.hmm.seed``)."""
    tickers = settings.market.tickers
    # a retry's jittered wait moves the virtual clock: drawn from the replay's seed, a replay in
    # which something fails once is repeated exactly
    jitter = random.Random(settings.regime.hmm.seed)

    def recorded_ticks(_backfill: object, _known_price: object) -> RecordedTicks:
        return RecordedTicks(
            clock,
            bus,
            feed,
            tickers=tickers,
            timeframes=settings.market.timeframes,
            end_ms=end_ms,
            read_ahead=tick_pool,
        )

    def recorded_context(config: DerivativesConfig, _window: object) -> Sequence[ContextField]:
        index = optional_fear_greed(settings.data_dir) if fear_greed is None else fear_greed
        spot = RecordedSpotKlines(settings.data_dir)
        return build_recorded_context_fields(
            config, clock, tickers, feed, index, spot, rand=jitter.random
        )

    return Ports(
        exchange=RecordedOhlcvExchange(feed, clock),
        make_ticks=recorded_ticks,
        context_fields=recorded_context,
        fit_offload=run_inline,
        fit_ahead=fit_ahead,
        fit_pool=fit_pool,
        memory=memory,
        analysts_pool=desk_pool,
        jitter=jitter,
    )
