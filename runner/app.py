"""The composition root: builds the daemon from Settings (see ``runner.wiring``) and runs it.

Everything that connects, opens files or reads the environment is created here or by the CLI, never
at import time. Tests build the same graph against loopback servers.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from core.bus import EventBus
from core.clock import Clock
from core.errors import HaltTradingError
from core.failpoints import Failpoints
from core.scaled_clock import ScaledClock
from regime.fit_pool import FitPool, daemon_fit_workers
from regime.tracker import Offload
from runner.agent_wiring import configured_key, wake_rules
from runner.api_wiring import OperatorSurface
from runner.config import Settings
from runner.cost_projection import projection_text
from runner.heartbeat import Heartbeat
from runner.journals import Journals, open_journals
from runner.logging_setup import configure_logging, show_clock_time
from runner.market_wiring import MarketPath, build_market_path, websocket_ports
from runner.sim_boot import DaemonClock, WsFront, daemon_clock, market_endpoints
from runner.stop_signals import on_stop_signals
from runner.supervision import supervise
from runner.supervisor import LoopSpec, ShutdownHook, Supervisor, run_hooks
from runner.warm_paths import warm_up_paths
from runner.watchdog import Watchdog
from runner.wiring import DecisionPath, build_decision_path
from state.daemon_lock import DaemonLock
from state.journal import CsvJournal, JsonlJournal
from state.state_dir import refuse_package_dir
from state.store import RunnerStateStore

log = logging.getLogger(__name__)


@dataclass
class Daemon:
    """The wired graph. It holds references; it computes nothing itself."""

    settings: Settings
    clock: Clock
    bus: EventBus
    store: RunnerStateStore
    decisions: JsonlJournal
    trades: CsvJournal
    market: MarketPath
    decision: DecisionPath
    heartbeat: Heartbeat
    watchdog: Watchdog
    supervisor: Supervisor
    sim: Any = None
    operator: OperatorSurface | None = None


async def build_daemon(
    settings: Settings,
    *,
    live: bool = False,
    ws_front: WsFront | None = None,
) -> Daemon:
    """``ws_front``: see ``runner.sim_boot.WsFront`` (the hostile-frame fuzz's man in the middle)."""
    # a key file without a usable key refuses here, not after the simulator has loaded its
    # recordings and started (seconds a person waited for the refusal); the client reads it again
    configured_key(settings)
    time = daemon_clock(settings)
    clock = time.clock
    show_clock_time(time.scaled)
    bus = EventBus()
    journals = open_journals(settings, clock, bus)
    failpoints = Failpoints(settings.failpoints)
    closers: list[tuple[str, ShutdownHook]] = []
    try:
        return await _wire(settings, time, bus, journals, failpoints, closers, live, ws_front)
    except BaseException:
        # a refusal after the simulator started left its servers and stall watch running until
        # the process exited: nothing else holds them to stop
        # newest first; each failure is logged, so the error that stopped the build is raised
        await run_hooks(reversed(closers), when="start-up refused")
        raise


async def _wire(
    settings: Settings,
    time: DaemonClock,
    bus: EventBus,
    journals: Journals,
    failpoints: Failpoints,
    closers: list[tuple[str, ShutdownHook]],
    live: bool,
    ws_front: WsFront | None,
) -> Daemon:
    clock = time.clock
    ends = await market_endpoints(settings, time, closers, ws_front)
    fit_pool = _fit_pool(settings, closers)
    ports = websocket_ports(
        settings,
        clock,
        bus,
        ends.ws_base,
        ends.rest_url,
        ws_path=ends.ws_path,
        simulator=ends.sim is not None,
        live_orders=live,
        fit_offload=_fit_offload(time.scaled),
        fit_pool=fit_pool,
    )
    market = build_market_path(settings, clock, bus, ports)
    closers.append(("close exchange client", market.exchange.close))
    decision = build_decision_path(
        settings, clock, bus, market, journals.store, journals.decisions, ports, failpoints
    )
    operator = OperatorSurface(settings, clock)
    heartbeat, watchdog, supervisor = supervise(
        settings,
        clock,
        bus,
        journals,
        market,
        decision,
        jitter=ports.jitter,
        extra_loops=[_state_watch(settings, clock, journals, decision), *operator.loops()],
        closers=closers,
        failpoints=failpoints,
        extra_subscriptions=operator.subscriptions(),
    )
    operator.attach(supervisor, bus, market, decision, journals.store, journals.decisions.health)
    return Daemon(
        settings,
        clock,
        bus,
        journals.store,
        journals.decisions,
        journals.trades,
        market,
        decision,
        heartbeat,
        watchdog,
        supervisor,
        ends.sim,
        operator,
    )


def _state_watch(
    settings: Settings, clock: Clock, journals: Journals, decision: DecisionPath
) -> LoopSpec:
    """Picks up a person's edit of ``runner_state.json`` (and the trading switch in it)."""

    async def watch_state() -> None:
        await journals.store.watch(
            clock, settings.state.watch_interval_secs, after_poll=decision.trading.observe
        )

    return LoopSpec("state_watch", watch_state)


def _fit_pool(settings: Settings, closers: list[tuple[str, ShutdownHook]]) -> FitPool | None:
    """The regime fits' child process (``regime.fit_pool``), started at the first fit."""
    workers = daemon_fit_workers(settings.regime.fit_ahead_workers)
    if workers == 0:
        return None
    pool = FitPool(workers, keep_alive=False)  # a day's fits take seconds: no idle process
    closers.append(("stop regime fit process", lambda: asyncio.to_thread(pool.close)))
    return pool


def _fit_offload(scaled: ScaledClock | None) -> Offload:
    return asyncio.to_thread if scaled is None else _held_while(scaled, asyncio.to_thread)


def _held_while(clock: ScaledClock, offload: Offload) -> Offload:
    """Against the simulator a regime fit stops simulated time: its half second of CPU would be
    minutes at the simulator's speed, during which the market moved on and the decision waiting
    for the regime (``RegimeView.snapshot``) saw later prices than a live daemon would."""

    async def held(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        with clock.hold():
            return await offload(fn, *args, **kwargs)

    return held


#: ``run_daemon``'s exit code when a loop ignored its cancellation: state was saved, but the process
#: must exit without waiting for that loop (``runner.cli`` exits at once on it)
EXIT_STUCK = 1


async def run_daemon(settings: Settings, *, live: bool = False) -> int:
    refuse_package_dir(settings.state_dir)  # before the lock file and the log file are made in it
    with DaemonLock(settings.state_dir):  # one daemon per state dir, until this one has stopped
        return await _run_locked(settings, live)


async def _run_locked(settings: Settings, live: bool) -> int:
    configure_logging(
        settings.log_level,
        settings.secret_values(),
        config=settings.log,
        log_file=settings.logs_dir / "vigil.log",
    )
    if settings.anthropic_api_key is not None:  # before the first call: what a day will cost
        journal = settings.state_dir / "logs" / "decisions.jsonl"
        print(
            "vigil: "
            + projection_text(
                settings.agent, journal, wake_rules(settings), len(settings.market.tickers)
            ),
            file=sys.stderr,
            flush=True,
        )
    stop_requests: list[str] = []  # a signal that lands while the daemon is still being built
    loop = asyncio.get_running_loop()
    on_stop_signals(loop, stop_requests.append)
    daemon = await build_daemon(settings, live=live)
    on_stop_signals(loop, daemon.supervisor.request_stop)
    if stop_requests:
        daemon.supervisor.request_stop(stop_requests[0])

    async def start() -> None:
        # supervised: SIGTERM during a minutes-long warm-up or reconcile stops the daemon at once
        await warm_up_paths(settings, daemon.clock, daemon.market, daemon.decision)
        if daemon.decision.broker_parts.start is not None:
            try:
                await daemon.decision.broker_parts.start()  # reconcile with the exchange first
            except HaltTradingError as exc:  # run on: exits and stops still work, entries wait
                daemon.decision.trading.halt(f"broker start: {exc}")

    report = await daemon.supervisor.run(start=start)
    return 0 if not report.stuck else EXIT_STUCK
