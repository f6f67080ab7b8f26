"""Wires the operator's API (``api/``) to a built daemon: its ports implemented on the daemon's
parts, the app, and the server loop ``build_daemon`` supervises with the others."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from agent.claude import ClaudeDecider
from api.app import ApiContext, create_app
from api.auth import resolve_token
from api.files import StateDirFiles, position_body
from api.freshness import StreamFreshness
from api.models import AccountBody, AgentBody, LoopBody, StreamBody
from api.server import ApiServer
from broker.port import Broker
from core.clock import Clock
from core.events import Topic
from runner.config import Settings
from runner.subscriptions import Inline, Subscription
from runner.supervisor import LoopSpec, LoopStatus, Supervisor
from runner.wiring import DecisionPath
from state.edits import StateEditReport
from state.store import RunnerStateStore


@dataclass
class DaemonPorts:
    """``api.ports.LiveDaemon`` on a running daemon's parts."""

    clock: Clock
    loop_status: Callable[[], Mapping[str, LoopStatus]]
    freshness: StreamFreshness
    decider: ClaudeDecider
    broker: Broker
    store: RunnerStateStore
    starting_cash_usd: float | None  # the paper account's; a ccxt account does not say

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

    def poll_state(self) -> StateEditReport | None:
        return self.store.poll()


def build_api_server(settings: Settings, ports: DaemonPorts) -> ApiServer:
    token = settings.api_token.get_secret_value() if settings.api_token else None
    config = settings.api
    ctx = ApiContext(
        files=StateDirFiles(settings.state_dir),
        config=config,
        token=resolve_token(token, config.host, settings.state_dir),
        daemon=ports,
    )
    return ApiServer(create_app(ctx), config.host, config.port, settings.state_dir)


class OperatorSurface:
    """The API as ``build_daemon`` adds it: a loop and a tick subscription, attached to the
    supervisor and the decision path once those exist (they are built after the loop list)."""

    def __init__(self, settings: Settings, clock: Clock) -> None:
        self._settings = settings
        self._clock = clock
        self.freshness = StreamFreshness(settings.market.tickers, settings.market.timeframes)
        self.server: ApiServer | None = None

    def loops(self) -> list[LoopSpec]:
        return [LoopSpec("api", self._serve)] if self._settings.api.enabled else []

    def subscriptions(self) -> list[Subscription]:
        return [Inline(Topic.MARKET_TICK, self.freshness.on_tick, "api_freshness")]

    def attach(
        self, supervisor: Supervisor, decision: DecisionPath, store: RunnerStateStore
    ) -> None:
        settings = self._settings
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
        )
        if settings.api.enabled:
            self.server = build_api_server(settings, ports)

    async def _serve(self) -> None:
        if self.server is None:
            raise RuntimeError("the API was not attached to the daemon")
        await self.server.run()


__all__ = ["DaemonPorts", "OperatorSurface", "build_api_server"]
