"""Replay: the daemon itself over recorded history, on the virtual clock.

The same composition as ``vigil run`` (``runner.journals.open_journals``, ``runner.wiring``'s market and
decision paths, ``runner.supervision.supervise``), with three adapters swapped where the live daemon touches
the network (``runner.replay.ports``), all serving the bundled recording through ``sim.feed.SimFeed``
(the simulator's own implementation) and never anything after the clock's now:

- ticks: ``sim.recorded_ticks.RecordedTicks`` instead of the websocket listener, its rows computed
  ahead in one worker process (``sim.tick_ahead``: the same functions, so the same ticks);
- analysts (without model summaries): their reports and day summaries written in another worker
  process over the same analysts.db (``runner.desk_ahead``: the same calls in the same order, so
  the same database and summaries);
- OHLCV (warm-up seed, 4h history for the regimes): ``sim.inprocess.RecordedOhlcvExchange``;
- derivatives context: ``sim.recorded_sources`` (funding, Fear & Greed and PAXG spot recorded;
  the rest reported unavailable, as against the simulator).

What replay changes on purpose, and why:
- the clock is a ``VirtualClock`` moved by ``runner.replay.driver.ReplayDriver``;
- regime fits run inline instead of in a worker thread (determinism), and are computed ahead in a
  process pool where the recording says which candles they will see (``regime.fit_ahead``: the
  results equal inline fits byte for byte);
- no ``state_watch`` loop: notes edited mid-replay would make the run unrepeatable (the notes in
  the output folder's runner_state.json at start are used);
- no FRED key (the recording has no macro series; the macro regime says unavailable);
- journals and ``runner_state.json`` (with its last-good copy) without fsync (a replay is rerun,
  not recovered; the state is still written to a temporary file and renamed into place) and a
  heartbeat once a simulated hour;
- ``--decider fallback`` runs without an Anthropic key, ``--decider claude`` and ``--decider
  debate`` need a daily budget (the debate makes ``2 * bb_rounds + 2`` calls per decision).
"""

from __future__ import annotations

import asyncio
import logging
import os
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from agent.debate import DebateDecider
from core.bus import EventBus
from core.clock import DAY_MS, VirtualClock, utc_minute
from core.errors import RefuseToStartError
from core.events import Event, Topic
from regime.config import SEED_MAX
from regime.fit_ahead import FitAhead, default_workers
from regime.fit_cache import FitCache
from regime.fit_pool import FitPool
from runner.config import Settings
from runner.desk_ahead import open_desk_pool
from runner.journals import Journals, open_journals
from runner.market_wiring import MarketPath, build_market_path
from runner.replay.data import RecordedData, open_recorded_data, replay_window
from runner.replay.driver import ReplayDriver
from runner.replay.estimate import expected_calls_text
from runner.replay.fit_frames import RecordedFutureFrames
from runner.replay.ports import replay_ports
from runner.subscriptions import Inline
from runner.supervision import supervise
from runner.supervisor import Supervisor
from runner.wiring import DecisionPath, build_decision_path
from sim.feed import SimFeed
from sim.recorded_ticks import RecordedTicks
from sim.tick_ahead import open_tick_pool

log = logging.getLogger(__name__)

#: 4 kline updates per 5m bar per stream: the sim's path rule at a replay-friendly cadence
DEFAULT_UPDATE_INTERVAL_MS = 75_000
#: without --update-secs each base bar is walked in this many updates (75 s on 5m bars, 15 s on 1m)
UPDATES_PER_BAR = 4
REPLAY_HEARTBEAT_SECS = 3600.0
RUN_FILES = (
    "runner_state.json",
    "logs/decisions.jsonl",
    "logs/trades.csv",
    "paper_broker.json",
    "models/online_learner.json",
)

Decider = Literal["fallback", "claude", "debate"]
MODEL_DECIDERS = ("claude", "debate")


@dataclass(frozen=True)
class ReplayOptions:
    start_ms: int  # inclusive
    end_ms: int  # exclusive: the replay stops before the first wake-up at or after it
    out_dir: Path
    tickers: tuple[str, ...]
    decider: Decider = "fallback"
    memory: bool = True
    speed: float | None = None  # None: as fast as the machine allows
    seed: int = 42  # the regime models' EM seed and every retry's jitter (runner.replay.ports)
    update_interval_ms: int | None = None  # None: a quarter of the base bar (75 s on 5m bars)
    base_interval: str | None = None  # None: the finest recorded for every ticker (1m .. 15m)

    @property
    def days(self) -> float:
        return (self.end_ms - self.start_ms) / DAY_MS

    def update_ms(self, bar_ms: int = 300_000) -> int:
        """The kline update interval on base bars of ``bar_ms``."""
        if self.update_interval_ms is not None:
            return self.update_interval_ms
        return bar_ms // UPDATES_PER_BAR


class FillCount:
    """Fills seen on the bus (the progress line and the outcome; trades.csv has them all)."""

    def __init__(self) -> None:
        self.fills = 0

    def on_fill(self, _event: Event) -> None:
        self.fills += 1


@dataclass
class Replay:
    """The wired replay. It holds references; it computes nothing itself."""

    settings: Settings
    options: ReplayOptions
    clock: VirtualClock
    bus: EventBus
    journals: Journals
    market: MarketPath
    decision: DecisionPath
    supervisor: Supervisor
    driver: ReplayDriver
    counts: FillCount
    data: RecordedData
    fit_ahead: FitAhead | None = None  # the regime fit-ahead planner
    fit_pool: FitPool | None = None  # the regime fits' processes (run_replay closes it)
    tick_pool: Executor | None = None  # the tick rows' process (run_replay closes it)
    desk_pool: Executor | None = None  # the analysts' process (run_replay closes it)

    @property
    def ticks(self) -> RecordedTicks:
        assert isinstance(self.market.ticks, RecordedTicks)
        return self.market.ticks


def replay_settings(settings: Settings, options: ReplayOptions) -> Settings:
    """The settings a replay runs with: its output folder as the state dir, its tickers, its
    decider's key (or none), its seed; no FRED key."""
    twice = sorted({t for t in options.tickers if options.tickers.count(t) > 1})
    if twice:
        raise RefuseToStartError(f"--tickers lists {', '.join(twice)} more than once")
    if not 0 <= options.seed <= SEED_MAX:  # set by model_copy below, which does not validate
        raise RefuseToStartError(f"--seed {options.seed}: the EM seed must be 0 .. {SEED_MAX}")
    unknown = [t for t in options.tickers if t not in settings.market.tickers]
    if unknown:
        raise RefuseToStartError(
            f"--tickers {', '.join(unknown)}: not configured; known: "
            f"{', '.join(settings.market.tickers)}"
        )
    if options.decider in MODEL_DECIDERS:
        flag = f"--decider {options.decider}"
        if settings.anthropic_api_key is None:
            raise RefuseToStartError(f"{flag} needs ANTHROPIC_API_KEY")
        if not settings.agent.daily_budget_usd:
            raise RefuseToStartError(
                f"{flag} needs a daily budget (VIGIL_AGENT__DAILY_BUDGET_USD or "
                f"[agent] daily_budget_usd): {expected_calls_text(options, settings)}"
            )
    regime = settings.regime.model_copy(
        update={
            "hmm": settings.regime.hmm.model_copy(update={"seed": options.seed}),
            "fit_cache_dir": settings.regime.fit_cache_dir or default_fit_cache_dir(),
        }
    )
    return settings.model_copy(
        update={
            "state_dir": options.out_dir,
            "market": settings.market.model_copy(update={"tickers": options.tickers}),
            "regime": regime,
            "anthropic_api_key": settings.anthropic_api_key
            if options.decider in MODEL_DECIDERS
            else None,
            "agent": settings.agent.model_copy(
                update={"decider": "debate" if options.decider == "debate" else "claude"}
            ),
            "fred_api_key": None,
            # a replay is rerun, not recovered: no fsync per journal line
            "state": settings.state.model_copy(update={"fsync_journals": False}),
            # a run folder is one artifact read whole (report, compare, parity): one journal file
            "journal": settings.journal.model_copy(
                update={"rotate_daily": False, "max_segment_bytes": None}
            ),
            # the beat marks progress in simulated time, not liveness: once a simulated hour
            "supervisor": settings.supervisor.model_copy(
                update={"heartbeat_interval_secs": REPLAY_HEARTBEAT_SECS}
            ),
        }
    )


def default_fit_cache_dir() -> Path:
    """Where replays keep fitted regime models unless ``regime.fit_cache_dir`` says otherwise."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "vigil" / "regime-fits"


def check_out_dir(out_dir: Path) -> None:
    """A replay writes a fresh run: it never appends to (or resumes) an earlier one."""
    taken = [name for name in RUN_FILES if (out_dir / name).exists()]
    if taken:
        raise RefuseToStartError(
            f"{out_dir} already holds a run ({', '.join(taken)}); choose another --out or delete it"
        )


def check_span(feed: SimFeed, options: ReplayOptions) -> None:
    if options.end_ms <= options.start_ms:
        raise RefuseToStartError("--to must be after --from")
    for ticker in options.tickers:
        first_ms, last_ms = feed.span_ms(ticker)
        if options.start_ms < first_ms or options.end_ms > last_ms + 1:
            raise RefuseToStartError(
                f"{ticker}: the recording covers {utc_minute(first_ms)} .. {utc_minute(last_ms + 1)}; "
                f"asked {utc_minute(options.start_ms)} .. {utc_minute(options.end_ms)}"
            )


def replay_ticks(settings: Settings, options: ReplayOptions, feed: SimFeed) -> int:
    """How many kline updates the replay publishes: every stream at every update instant."""
    streams = len(settings.market.tickers) * len(settings.market.timeframes)
    return streams * ((options.end_ms - options.start_ms) // feed.update_interval_ms)


def build_replay(settings: Settings, options: ReplayOptions) -> Replay:
    """Wire the daemon for a replay. ``settings`` must come from ``replay_settings``."""
    check_out_dir(options.out_dir)
    data = open_recorded_data(settings.data_dir, options, replay_window(settings, options))
    feed = data.feed
    check_span(feed, options)
    tick_pool = open_tick_pool(feed, replay_ticks(settings, options, feed))
    # its process starts only if the analysts use it (memory on, no model summaries)
    desk_pool = open_desk_pool(options.days) if options.memory else None
    clock = VirtualClock(options.start_ms)
    bus = EventBus()
    # no state_watch either; the state saves (two files each, one every few tracker checks) skip
    # fsync as the journals do
    journals = open_journals(settings, clock, bus, state_edits=False, state_durable=False)
    pool = build_fit_pool(settings)
    ports = replay_ports(
        settings,
        clock,
        bus,
        feed,
        end_ms=options.end_ms,
        memory=options.memory,
        fear_greed=data.fear_greed,
        fit_ahead=(ahead := build_fit_ahead(settings, feed, options.end_ms, pool)),
        fit_pool=pool,
        tick_pool=tick_pool,
        desk_pool=desk_pool,
    )
    market = build_market_path(settings, clock, bus, ports)
    decision = build_decision_path(
        settings, clock, bus, market, journals.store, journals.decisions, ports
    )
    counts = FillCount()
    _heartbeat, _watchdog, supervisor = supervise(
        settings,
        clock,
        bus,
        journals,
        market,
        decision,
        jitter=ports.jitter,
        extra_subscriptions=[Inline(Topic.ORDER_FILLED, counts.on_fill, "replay_fill_count")],
        atomic_heartbeat=False,  # nobody health-checks a run folder (runner.heartbeat)
    )
    driver = build_driver(clock, options, decision)
    assert isinstance(market.ticks, RecordedTicks)
    market.ticks.prefetch()  # the worker loads its feed while the daemon warms up
    return Replay(
        settings,
        options,
        clock,
        bus,
        journals,
        market,
        decision,
        supervisor,
        driver,
        counts,
        data,
        ahead,
        pool,
        tick_pool,
        desk_pool,
    )


def build_driver(
    clock: VirtualClock, options: ReplayOptions, decision: DecisionPath
) -> ReplayDriver:
    routine, tracker = decision.routine, decision.tracker
    return ReplayDriver(
        clock,
        options.end_ms,
        # in flight = waiting on the network; a retry's backoff waits on this clock, which must move
        busy=(
            lambda: routine.deciding and not _all_parked(clock, routine.task, decision),
            lambda: tracker.reviewing and not clock.is_parked(tracker.review_task),
        ),
        speed=options.speed,
    )


def build_fit_pool(settings: Settings) -> FitPool | None:
    """The processes every regime fit runs in (``regime.fit_pool``), or None: fits run inline."""
    regime = settings.regime
    workers = default_workers() if regime.fit_ahead_workers is None else regime.fit_ahead_workers
    return FitPool(workers) if workers > 0 else None


def build_fit_ahead(
    settings: Settings, feed: SimFeed, end_ms: int, pool: FitPool | None
) -> FitAhead | None:
    """The regime fit-ahead planner (``regime.fit_ahead``) on ``pool``, or None when there is no
    pool or nothing can be planned (warm-started fits)."""
    if pool is None:
        return None
    regime = settings.regime
    ahead = FitAhead(
        regime.hmm,
        RecordedFutureFrames(feed, history_days=settings.market.history_days, end_ms=end_ms),
        refit_every_ms=round(regime.refit_every_secs * 1000),
        workers=pool.workers,
        pool=pool,
        cache=FitCache(regime.fit_cache_dir) if regime.fit_cache_dir is not None else None,
    )
    return ahead if ahead.active else None


def _all_parked(
    clock: VirtualClock, task: asyncio.Task[Any] | None, decision: DecisionPath
) -> bool:
    """A decision waits on the clock: the routine's task, or, while a debate's concurrent role
    calls run, every one of them (one in a retry's backoff and one on the network: not parked)."""
    decider = decision.agents.decider
    roles = decider.role_tasks if isinstance(decider, DebateDecider) else set()
    live = [t for t in roles if not t.done()]
    if live:
        return all(clock.is_parked(t) for t in live)
    return clock.is_parked(task)


__all__ = [
    "DEFAULT_UPDATE_INTERVAL_MS",
    "Replay",
    "ReplayOptions",
    "build_replay",
    "check_out_dir",
    "replay_settings",
]
