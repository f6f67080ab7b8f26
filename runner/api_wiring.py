"""Wires the operator's API (``api/``) to a built daemon: its ports implemented on the daemon's
parts, the app, and the server loop ``build_daemon`` supervises with the others."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from agent.claude import ClaudeDecider
from agent.debate import DebateDecider
from api.app import ApiContext, create_app
from api.auth import resolve_token
from api.files import StateDirFiles, position_body
from api.freshness import StreamFreshness
from api.metrics import DaemonCounts, DaemonMetrics
from api.models import AccountBody, AgentBody, GateBody, LoopBody, StreamBody, TradingBody
from api.notify.watch import NotifyService, Sample
from api.ports import TradingControl
from api.runs import RunQueue
from api.runs_routes import run_routes
from api.server import ApiServer
from api.stream import DecisionStream, stream_routes
from broker.port import Broker
from broker.trading_state import TradingSwitch
from core.bus import EventBus
from core.clock import Clock
from core.errors import VigilError
from core.events import Topic
from gate.gate import AdaptiveGate
from market.ports import TickSource
from runner.api_process import ApiProcessSpec, run_api_process
from runner.config import Settings
from runner.market_wiring import MarketPath
from runner.runs_launcher import build_run_queue
from runner.subscriptions import Inline, Subscription
from runner.supervisor import LoopSpec, LoopStatus, Supervisor
from runner.wiring import DecisionPath
from state.edits import StateEditReport
from state.journal_health import JournalHealth
from state.store import RunnerStateStore

GATE_LAYERS = ("candle_close", "agent_timer", "anomaly", "wake_condition")


@dataclass
class DaemonPorts:
    """``api.ports.LiveDaemon`` on a running daemon's parts."""

    clock: Clock
    loop_status: Callable[[], Mapping[str, LoopStatus]]
    freshness: StreamFreshness
    decider: ClaudeDecider | DebateDecider
    broker: Broker
    store: RunnerStateStore
    starting_cash_usd: float | None  # the paper account's; a ccxt account does not say
    ticks: TickSource
    bus: EventBus
    adaptive_gate: AdaptiveGate
    journal_health: JournalHealth

    def now_ms(self) -> int:
        return self.clock.now_ms()

    def loops(self) -> list[LoopBody]:
        return [
            LoopBody(name=name, state=s.state.value, restarts=s.restarts, last_error=s.last_error)
            for name, s in self.loop_status().items()
        ]

    def streams(self) -> list[StreamBody]:
        return self.freshness.streams(self.clock.now_ms())

    def agent(self) -> AgentBody:
        status = self.decider.status()
        budget = self.decider.ledger.budget
        limit = budget.limit_usd
        spent = budget.spent_today_usd
        return AgentBody(
            enabled=bool(status["enabled"]),
            disabled_reason=str(status["disabled_reason"]),
            breaker=str(status["breaker"]),
            budget_limit_usd=limit,
            budget_left_today_usd=None if limit is None else max(0.0, limit - spent),
            budget_exhausted=bool(status["budget_exhausted"]),
            calls=int(status["calls"]),
            failed_calls=int(status["failed_calls"]),
            input_tokens=int(status["input_tokens"]),
            output_tokens=int(status["output_tokens"]),
            cost_total_usd=float(status["cost_total_usd"]),
            cost_today_usd=float(status["cost_today_usd"]),
        )

    def gate(self) -> GateBody:
        stats = self.adaptive_gate.stats()
        return GateBody(
            evaluations=stats.evaluations,
            passes=stats.passes,
            passes_by_layer={name: getattr(stats, name).passed for name in GATE_LAYERS},
            last_pass_at_ms=stats.last_pass_at_ms,
            last_wake_reasons=list(stats.last_wake_reasons),
        )

    async def account(self) -> AccountBody:
        details = await self.broker.get_positions_detail()
        equity = await self.broker.get_portfolio_value()
        cash = await self.broker.get_cash()
        positions = [
            position_body(d.ticker, d.quantity, d.entry_price, d.mark_price, d.opened_at_ms)
            for d in details
        ]
        return AccountBody(
            equity_usd=round(equity, 2),
            cash_usd=round(cash, 2),
            starting_cash_usd=self.starting_cash_usd,
            positions=positions,
            unavailable=(
                {}
                if self.starting_cash_usd is not None
                else {"starting_cash_usd": "the exchange account does not report it"}
            ),
        )

    def counts(self) -> DaemonCounts:
        ticks = self.ticks.stats
        bus = self.bus.stats()
        gate = self.adaptive_gate.stats()
        return DaemonCounts(
            ticks=ticks.ticks_published,
            frames=int(getattr(ticks, "frames", ticks.ticks_published)),
            rejected_frames=dict(ticks.rejected),
            reconnects=dict(ticks.reconnects),
            bus_queue_depth={k: v["queued"] for k, v in bus.items() if "queued" in v},
            bus_dropped={k: v["dropped"] for k, v in bus.items()},
            bus_failed={k: v["failed"] for k, v in bus.items()},
            gate_passes={name: getattr(gate, name).passed for name in GATE_LAYERS},
            gate_evaluations=gate.evaluations,
            loop_restarts={name: s.restarts for name, s in self.loop_status().items()},
            journal_failed_writes=self.journal_health.failed_writes,
            journal_degraded_lines=self.journal_health.degraded_lines,
        )

    def poll_state(self) -> StateEditReport | None:
        return self.store.poll()


class SwitchControl:
    """``api.ports.TradingControl`` over the daemon's ``TradingSwitch``: a halt or resume from the
    API is journaled and saved like one from the CLI, with ``by = "api"``."""

    def __init__(self, switch: TradingSwitch) -> None:
        self._switch = switch

    def trading(self) -> TradingBody:
        state = self._switch.state
        return TradingBody(state=state.mode, reason=state.reason, changed_at_ms=state.since_ms)

    def halt(self, reason: str) -> TradingBody:
        self._switch.halt(reason, by="api")
        return self.trading()

    def resume(self) -> TradingBody:
        self._switch.resume(by="api")
        return self.trading()


def build_api_server(
    settings: Settings,
    ports: DaemonPorts,
    metrics: DaemonMetrics,
    stream: DecisionStream,
    trading: TradingControl | None = None,
    runs: RunQueue | None = None,
    trading_busy: Callable[[], bool] | None = None,
) -> ApiServer:
    """The API on the daemon's loop: the public one (``inline``), or the private one the API
    process asks (``process``: loopback, a free port, not published in ``api.json``)."""
    config = settings.api
    ctx = ApiContext(
        files=StateDirFiles(settings.state_dir),
        config=config,
        token=api_token(settings),
        daemon=ports,
        trading=trading,
        metrics=metrics,
        extensions=[stream_routes(stream)] + ([run_routes(runs)] if runs is not None else []),
        prices_as_of=settings.agent.prices.as_of,
        trading_busy=trading_busy,
    )
    if config.isolation == "process":
        return ApiServer(create_app(ctx), "127.0.0.1", 0)
    return ApiServer(create_app(ctx), config.host, config.port, settings.state_dir)


def api_token(settings: Settings) -> str:
    configured = settings.api_token.get_secret_value() if settings.api_token else None
    return resolve_token(configured, settings.api.host, settings.state_dir)


def api_process_spec(settings: Settings) -> ApiProcessSpec:
    return ApiProcessSpec(
        state_dir=settings.state_dir,
        logs_dir=settings.logs_dir,
        api=settings.api,
        token=api_token(settings),
        upstream_url="",  # known once the private API listens (run_api_process)
        prices_as_of=settings.agent.prices.as_of,
        log_level=settings.log_level,
        log=settings.log,
    )


class OperatorSurface:
    """The API as ``build_daemon`` adds it: a loop and a tick subscription, attached to the
    supervisor and the decision path once those exist (they are built after the loop list)."""

    def __init__(self, settings: Settings, clock: Clock) -> None:
        self._settings = settings
        self._clock = clock
        self.freshness = StreamFreshness(settings.market.tickers, settings.market.timeframes)
        self.metrics = DaemonMetrics()
        self.stream = DecisionStream(settings.api.stream_queue_size)
        self.server: ApiServer | None = None
        self._ports: DaemonPorts | None = None
        self._trading: TradingControl | None = None
        self.notify: NotifyService | None = None
        # replays asked through the API, in child processes (``api.runs``)
        self.runs = build_run_queue(settings) if settings.api.enabled else None
        if settings.notify.webhooks:
            self.notify = NotifyService(
                settings.notify, clock, self._sample, settings.supervisor.market_stale_secs
            )

    def loops(self) -> list[LoopSpec]:
        # both wind a child process down with a grace of its own: beside the other loops' stops
        loops = (
            [LoopSpec("api", self._serve, stop_early=True)] if self._settings.api.enabled else []
        )
        if self.runs is not None:
            loops.append(LoopSpec("api_runs", self.runs.run, stop_early=True))
        if self.notify is not None:
            loops.append(LoopSpec("notify", self.notify.run))
        return loops

    def subscriptions(self) -> list[Subscription]:
        subs: list[Subscription] = [
            Inline(Topic.MARKET_TICK, self.freshness.on_tick, "api_freshness"),
            Inline(Topic.ORDER_FILLED, self.metrics.on_event, "metrics"),
            Inline(Topic.POSITION_EXIT, self.metrics.on_event, "metrics"),
        ]
        if self.notify is not None:
            subs += [
                Inline(Topic.ORDER_FILLED, self.notify.on_event, "notify"),
                Inline(Topic.POSITION_EXIT, self.notify.on_event, "notify"),
            ]
        return subs

    def attach(
        self,
        supervisor: Supervisor,
        bus: EventBus,
        market: MarketPath,
        decision: DecisionPath,
        store: RunnerStateStore,
        journal_health: JournalHealth,
    ) -> None:
        settings = self._settings
        decision.routine.observers.append(self.metrics.on_decision)
        decision.routine.observers.append(self.stream.publish)
        if self.notify is not None:
            decision.routine.observers.append(self.notify.on_decision)
        ports = DaemonPorts(
            clock=self._clock,
            loop_status=lambda: supervisor.status,
            freshness=self.freshness,
            decider=decision.agents.decider,
            broker=decision.broker_parts.broker,
            store=store,
            starting_cash_usd=(
                settings.broker.starting_cash_usd if settings.broker.kind == "paper" else None
            ),
            ticks=market.ticks,
            bus=bus,
            adaptive_gate=decision.gate,
            journal_health=journal_health,
        )
        control = SwitchControl(decision.trading)
        self._ports, self._trading = ports, control
        if settings.api.enabled:
            routine = decision.routine
            self.server = build_api_server(
                settings, ports, self.metrics, self.stream, control, self.runs,
                trading_busy=lambda: routine.deciding,
            )  # fmt: skip

    async def _sample(self) -> Sample:
        """What the notifier's watcher compares (see ``api.notify.watch``)."""
        ports, trading = self._ports, self._trading
        if ports is None or trading is None:
            raise RuntimeError("notifications were not attached to the daemon")
        now_ms = ports.now_ms()
        loops = ports.loops()
        ages = [s.age_secs for s in ports.streams() if s.age_secs is not None]
        state = trading.trading()
        try:
            equity: float | None = (await ports.account()).equity_usd
        except VigilError:  # the exchange down: unknown equity, and the halt it may bring is news
            equity = None
        return Sample(
            at_ms=now_ms,
            trading=state.state,
            trading_reason=state.reason,
            breaker=ports.agent().breaker,
            loop_restarts={loop.name: loop.restarts for loop in loops},
            loop_errors={loop.name: loop.last_error for loop in loops},
            journal_failed_writes=ports.journal_health.failed_writes,
            market_silent_secs=min(ages) if ages else None,
            equity_usd=equity,
        )

    async def _serve(self) -> None:
        if self.server is None:
            raise RuntimeError("the API was not attached to the daemon")
        if self._settings.api.isolation == "process":
            await run_api_process(self.server, api_process_spec(self._settings))
        else:
            await self.server.run()


__all__ = ["DaemonPorts", "OperatorSurface", "SwitchControl", "build_api_server"]
