"""The composition root: builds the daemon from Settings (see ``runner.wiring``) and runs it.

Everything that connects, opens files or reads the environment is created here or by the CLI, never
at import time. Tests build the same graph against loopback servers.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from collections.abc import Awaitable, Callable, Sequence
from contextlib import nullcontext, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from core.backoff import Backoff
from core.bus import EventBus
from core.clock import Clock, ScaledClock, WallClock
from core.errors import HaltTradingError, RefuseToStartError
from core.failpoints import Failpoints
from core.redact import Redactor
from regime.tracker import Offload
from runner.api_wiring import OperatorSurface
from runner.config import Settings
from runner.cost_projection import projection_text
from runner.heartbeat import Heartbeat
from runner.logging_setup import configure_logging, show_clock_time
from runner.sim_start import sim_start_ms
from runner.status import StatusReporter
from runner.subscriptions import Subscription, daemon_subscriptions, subscribe_all
from runner.supervisor import LoopSpec, ShutdownHook, Supervisor
from runner.warmup import warm_up
from runner.watchdog import Watchdog
from runner.wiring import (
    DecisionPath,
    MarketPath,
    build_decision_path,
    build_market_path,
    websocket_ports,
)
from state.csv_widen import widen_csv_columns
from state.journal import CsvJournal, JsonlJournal
from state.journal_health import FAULT_FILE_NAME, JournalHealth
from state.records import TRADE_COLUMNS, TRADE_COLUMNS_V1
from state.store import RunnerStateStore

log = logging.getLogger(__name__)

WARM_UP_TIMEOUT_SECS = 120.0


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


def _prepare_logs_dir(logs_dir: Path) -> None:
    """The store has created and probed the state dir; its logs/ may still be unusable."""
    try:
        logs_dir.mkdir(exist_ok=True)
    except OSError as exc:
        raise RefuseToStartError(
            f"{logs_dir} cannot be created ({exc.strerror or exc}); fix the state dir's "
            "ownership/permissions or point VIGIL_STATE_DIR elsewhere"
        ) from None


@dataclass
class Journals:
    """The state store and the two journals every daemon (live, simulator, replay) writes."""

    store: RunnerStateStore
    decisions: JsonlJournal
    trades: CsvJournal


def open_journals(settings: Settings, clock: Clock, bus: EventBus) -> Journals:
    store = RunnerStateStore(settings.runner_state_path, clock, Redactor(settings.secret_values()))
    store.load()  # creates the state dir and refuses to start if it is not writable
    _prepare_logs_dir(settings.logs_dir)
    fsync = settings.state.fsync_journals
    health = JournalHealth(settings.state_dir / FAULT_FILE_NAME)  # read by people and `health`
    decisions = JsonlJournal(
        settings.logs_dir / "decisions.jsonl", fsync=fsync, clock=clock, health=health
    )
    trades_path = settings.logs_dir / "trades.csv"
    widen_csv_columns(trades_path, TRADE_COLUMNS_V1, TRADE_COLUMNS)  # a state dir from before
    trades = CsvJournal(trades_path, TRADE_COLUMNS, fsync=fsync, clock=clock, health=health)
    return Journals(store, decisions, trades)


async def build_daemon(
    settings: Settings,
    *,
    live: bool = False,
    ws_front: Callable[[Clock, str], Awaitable[str]] | None = None,
) -> Daemon:
    """``ws_front``: given the clock and the simulator's websocket base URL, start something in
    front of it and return the URL the listener connects to instead (the hostile-frame fuzz's man
    in the middle, ``sim.hostile_proxy``)."""
    use_sim = settings.market.source == "sim"
    feed = None
    scaled: ScaledClock | None = None
    clock: Clock = WallClock()
    if use_sim:
        from sim.feed import SimFeed

        feed = SimFeed(
            settings.market.tickers,
            data_dir=settings.data_dir,
            update_interval_ms=settings.sim.update_interval_ms,
        )
        start_ms = sim_start_ms(
            settings.sim.start_ms,
            settings.runner_state_path,
            settings.logs_dir / "decisions.jsonl",
            feed,
        )
        clock = scaled = ScaledClock(start_ms, settings.sim.speed)
    show_clock_time(clock if use_sim else None)
    bus = EventBus()
    journals = open_journals(settings, clock, bus)
    store, decisions = journals.store, journals.decisions
    failpoints = Failpoints(settings.failpoints)

    closers: list[tuple[str, ShutdownHook]] = []
    sim = None
    if use_sim:
        from sim.exchange import SimExchange

        assert scaled is not None
        with scaled.hold():  # starting the simulator takes wall seconds: not simulated hours
            sim = SimExchange(
                clock,
                settings.market.tickers,
                data_dir=settings.data_dir,
                update_interval_ms=settings.sim.update_interval_ms,
                feed=feed,
            )
            await sim.start()
        closers.append(("stop simulator", sim.stop))
        ws_base, rest_url, ws_path = sim.ws_base_url, sim.rest_url, "/market/stream"
        if ws_front is not None:
            ws_base = await ws_front(clock, ws_base)
        log.info(
            "simulator on %s (ws) and %s (REST), %sx from %s",
            ws_base,
            rest_url,
            settings.sim.speed,
            datetime.fromtimestamp(clock.now_ms() / 1000, tz=UTC).isoformat(),
        )
    else:
        ws_base, ws_path = _split_ws_url(settings.market.binance_ws_url)
        rest_url = None

    ports = websocket_ports(
        settings,
        clock,
        bus,
        ws_base,
        rest_url,
        ws_path=ws_path,
        simulator=use_sim,
        live_orders=live,
        fit_offload=asyncio.to_thread if scaled is None else _held_while(scaled, asyncio.to_thread),
    )
    market = build_market_path(settings, clock, bus, ports)
    closers.append(("close exchange client", market.exchange.close))
    decision = build_decision_path(
        settings, clock, bus, market, store, decisions, ports, failpoints
    )

    async def watch_state() -> None:
        await store.watch(
            clock, settings.state.watch_interval_secs, after_poll=decision.trading.observe
        )

    operator = OperatorSurface(settings, clock)
    heartbeat, watchdog, supervisor = supervise(
        settings,
        clock,
        bus,
        journals,
        market,
        decision,
        extra_loops=[LoopSpec("state_watch", watch_state), *operator.loops()],
        closers=closers,
        failpoints=failpoints,
        extra_subscriptions=operator.subscriptions(),
    )
    operator.attach(supervisor, bus, market, decision, store, decisions.health)
    return Daemon(
        settings,
        clock,
        bus,
        store,
        decisions,
        journals.trades,
        market,
        decision,
        heartbeat,
        watchdog,
        supervisor,
        sim,
        operator,
    )


def _held_while(clock: ScaledClock, offload: Offload) -> Offload:
    """Against the simulator a regime fit stops simulated time: its half second of CPU would be
    minutes at the simulator's speed, during which the market moved on and the decision waiting
    for the regime (``RegimeView.snapshot``) saw later prices than a live daemon would."""

    async def held(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        with clock.hold():
            return await offload(fn, *args, **kwargs)

    return held


def supervise(
    settings: Settings,
    clock: Clock,
    bus: EventBus,
    journals: Journals,
    market: MarketPath,
    decision: DecisionPath,
    *,
    extra_loops: Sequence[LoopSpec] = (),
    closers: Sequence[tuple[str, ShutdownHook]] = (),
    failpoints: Failpoints | None = None,
    extra_subscriptions: Sequence[Subscription] = (),
) -> tuple[Heartbeat, Watchdog, Supervisor]:
    """The bus subscriptions (one table, ``runner.subscriptions``), the loops, their supervisor
    and the ordered shutdown (journals, state, learner, clients)."""
    supervisor: Supervisor | None = None

    def loop_restarts() -> int:
        return 0 if supervisor is None else sum(s.restarts for s in supervisor.status.values())

    def journal_error() -> str | None:
        health = journals.decisions.health  # shared by both journals
        return None if health.ok else health.last_error or "a journal write failed"

    heartbeat, watchdog = _bookkeeping(
        settings,
        clock,
        bus,
        market,
        decision,
        loop_restarts=loop_restarts,
        journal_error=journal_error,
    )
    table = daemon_subscriptions(
        decision,
        decisions_journal=journals.decisions,
        trades_journal=journals.trades,
        watchdog=watchdog,
        failpoints=failpoints or Failpoints(),
    )
    subscribe_all(bus, [*table, *extra_subscriptions])
    loops = [
        LoopSpec("market", market.ticks.run),
        LoopSpec("derivatives", decision.derivatives.run),
        *(
            [LoopSpec("liquidations", decision.liquidations.run)]
            if decision.liquidations is not None
            else []
        ),
        LoopSpec("decisions", decision.routine.run),
        LoopSpec("tracker", decision.tracker.run),
        LoopSpec("bus", bus.run),
        *extra_loops,
        LoopSpec("watchdog", watchdog.run),
        LoopSpec("heartbeat", heartbeat.run),
    ]
    hooks: list[tuple[str, ShutdownHook]] = [
        ("flush decisions journal", journals.decisions.close),
        ("flush trades journal", journals.trades.close),
        ("save runner state", journals.store.save),
        ("save the learner", lambda: decision.learner.save() if decision.learner.unsaved else None),
        ("close the Claude client", decision.agents.decider.aclose),
        *(
            [("close the broker", decision.broker_parts.close)]
            if decision.broker_parts.close is not None
            else []
        ),
        *closers,
    ]
    supervisor = Supervisor(
        clock,
        bus,
        loops,
        policy=Backoff(
            base_secs=settings.supervisor.restart_base_secs,
            cap_secs=settings.supervisor.restart_cap_secs,
            jitter_fraction=settings.supervisor.restart_jitter_fraction,
        ),
        shutdown_hooks=hooks,
        shutdown_deadline_secs=settings.supervisor.shutdown_deadline_secs,
        on_halt=decision.trading.halt,
    )
    return heartbeat, watchdog, supervisor


def _bookkeeping(
    settings: Settings,
    clock: Clock,
    bus: EventBus,
    market: MarketPath,
    decision: DecisionPath,
    *,
    loop_restarts: Callable[[], int],
    journal_error: Callable[[], str | None],
) -> tuple[Heartbeat, Watchdog]:
    listener, aggregator = market.ticks, market.aggregator
    status = StatusReporter(
        clock,
        settings.supervisor.status_interval_secs,
        figures={
            "ticks": lambda: listener.stats.ticks_published,
            "closes": lambda: aggregator.stats.closes_emitted,
            "rejected": lambda: sum(listener.stats.rejected.values()),
            "reconnects": lambda: sum(listener.stats.reconnects.values()),
            "decisions": lambda: decision.routine.runs,
            "claude_calls": lambda: decision.agents.decider.totals().calls,
            "cost_usd": lambda: f"{decision.agents.decider.totals().cost_total_usd:.4f}",
            "equity": decision.broker_parts.equity,
            "positions": lambda: len(decision.tracker.positions),
            "loop_restarts": loop_restarts,
            "trading": decision.trading.status,
        },
        prices=lambda: [(t, aggregator.last_price(t)) for t in settings.market.tickers],
    )
    watchdog = Watchdog(
        clock,
        bus,
        silence_secs=settings.supervisor.watchdog_silence_secs,
        check_secs=settings.supervisor.watchdog_check_secs,
        streams=[f"{t} {tf}" for t in settings.market.tickers for tf in settings.market.timeframes],
    )

    def facts() -> dict[str, Any]:
        return {
            "market": watchdog.market_report(),
            "trading": decision.trading.state.model_dump(mode="json"),
            "journal_error": journal_error(),
        }

    heartbeat = Heartbeat(
        clock,
        settings.heartbeat_path,
        settings.supervisor.heartbeat_interval_secs,
        on_beat=status.maybe_report,
        facts=facts,
    )
    return heartbeat, watchdog


def _split_ws_url(url: str) -> tuple[str, str]:
    """``wss://host/market/stream`` -> (``wss://host``, ``/market/stream``)."""
    scheme, _, rest = url.partition("://")
    host, _, path = rest.partition("/")
    return f"{scheme}://{host}", "/" + (path or "stream")


async def warm_up_paths(
    settings: Settings,
    clock: Clock,
    market: MarketPath,
    decision: DecisionPath,
    *,
    timeout_secs: float = WARM_UP_TIMEOUT_SECS,
) -> None:
    """``runner.warmup.warm_up`` for a wired daemon (live, simulator or replay).

    Against the simulator the scaled clock is held meanwhile: warm-up takes seconds of wall time,
    hours of simulated time at high speed, and a daemon that started trading that much later (how
    much later depending on the machine) would meet another market than the one it was started at.
    (A request retried on the held clock would wait for ``timeout_secs`` of real time.)"""
    with clock.hold() if isinstance(clock, ScaledClock) else nullcontext():
        await warm_up(
            clock,
            market.backfill,
            market.aggregator,
            market.ticks,
            market.history,
            decision.regimes,
            settings.market.tickers,
            settings.market.timeframes,
            timeout_secs=timeout_secs,
        )


#: ``run_daemon``'s exit code when a loop ignored its cancellation: state was saved, but the process
#: must exit without waiting for that loop (``runner.cli`` exits at once on it)
EXIT_STUCK = 1


async def run_daemon(settings: Settings, *, live: bool = False) -> int:
    configure_logging(settings.log_level, settings.secret_values())
    if settings.anthropic_api_key is not None:  # before the first call: what a day will cost
        journal = settings.state_dir / "logs" / "decisions.jsonl"
        print(
            "vigil: " + projection_text(settings.agent, journal, len(settings.market.tickers)),
            file=sys.stderr,
            flush=True,
        )
    stop_requests: list[str] = []  # a signal that lands while the daemon is still being built
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop_requests.append, sig.name)
    daemon = await build_daemon(settings, live=live)
    for sig in (signal.SIGTERM, signal.SIGINT):
        with suppress(NotImplementedError):
            loop.add_signal_handler(sig, daemon.supervisor.request_stop, sig.name)
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
