"""Everything around the paths: the bus subscriptions (one table, ``runner.subscriptions``), the
loops in start order, the status line, heartbeat and watchdog, and the ordered shutdown. Live,
simulator and replay daemons are supervised by this one function."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from core.backoff import Backoff
from core.bus import EventBus
from core.clock import Clock
from core.failpoints import Failpoints
from runner.config import Settings
from runner.heartbeat import Heartbeat
from runner.journals import Journals
from runner.market_wiring import MarketPath
from runner.status import StatusReporter
from runner.subscriptions import Subscription, daemon_subscriptions, subscribe_all
from runner.supervisor import LoopSpec, ShutdownHook, Supervisor
from runner.watchdog import Watchdog
from runner.wiring import DecisionPath


def supervise(
    settings: Settings,
    clock: Clock,
    bus: EventBus,
    journals: Journals,
    market: MarketPath,
    decision: DecisionPath,
    *,
    jitter: random.Random,
    extra_loops: Sequence[LoopSpec] = (),
    closers: Sequence[tuple[str, ShutdownHook]] = (),
    failpoints: Failpoints | None = None,
    extra_subscriptions: Sequence[Subscription] = (),
    atomic_heartbeat: bool = True,
) -> tuple[Heartbeat, Watchdog, Supervisor]:
    """The bus subscriptions (one table, ``runner.subscriptions``), the loops, their supervisor
    and the ordered shutdown (journals, state, learner, clients). ``jitter``: the daemon's one
    source of jitter (``Ports.jitter``), here for the loops' restart delays."""
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
        atomic_heartbeat=atomic_heartbeat,
    )
    table = daemon_subscriptions(
        decision,
        decisions_journal=journals.decisions,
        trades_journal=journals.trades,
        watchdog=watchdog,
        failpoints=failpoints or Failpoints(),
    )
    subscribe_all(bus, [*table, *extra_subscriptions])
    loops = _daemon_loops(bus, market, decision, watchdog, heartbeat, extra_loops)
    hooks = _shutdown_hooks(journals, decision, closers)
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
        rng=jitter,
    )
    return heartbeat, watchdog, supervisor


def _daemon_loops(
    bus: EventBus,
    market: MarketPath,
    decision: DecisionPath,
    watchdog: Watchdog,
    heartbeat: Heartbeat,
    extra_loops: Sequence[LoopSpec],
) -> list[LoopSpec]:
    """Every loop the supervisor runs, in start order (the watchdog and heartbeat last: they
    report on the others)."""
    return [
        LoopSpec("market", _until_stopped(market.ticks.run)),
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


def _shutdown_hooks(
    journals: Journals, decision: DecisionPath, closers: Sequence[tuple[str, ShutdownHook]]
) -> list[tuple[str, ShutdownHook]]:
    """The ordered shutdown: journals and state first (what a person reads after a stop), then
    the learner, then clients and servers."""
    return [
        ("flush decisions journal", journals.decisions.close),
        ("flush trades journal", journals.trades.close),
        ("save runner state", journals.store.save),
        ("save the learner", lambda: decision.learner.save() if decision.learner.unsaved else None),
        *(
            [("flush the analysts' reports and session files", decision.context.flush)]
            if decision.context is not None
            else []
        ),
        ("close the Claude client", decision.agents.decider.aclose),
        *(
            [("close the broker", decision.broker_parts.close)]
            if decision.broker_parts.close is not None
            else []
        ),
        *closers,
    ]


def _bookkeeping(
    settings: Settings,
    clock: Clock,
    bus: EventBus,
    market: MarketPath,
    decision: DecisionPath,
    *,
    loop_restarts: Callable[[], int],
    journal_error: Callable[[], str | None],
    atomic_heartbeat: bool,
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
        atomic=atomic_heartbeat,
    )
    return heartbeat, watchdog


def _until_stopped(run: Callable[[], Awaitable[None]]) -> Callable[[], Awaitable[None]]:
    """The market loop: a recorded source (replay) returns at its recording's end, which comes
    before the run's when the data ends with the replayed day; the supervisor restarts a loop
    that returns as a failure, so it then waits to be stopped, as a quiet feed would."""

    async def market() -> None:
        await run()
        await asyncio.Event().wait()

    return market
