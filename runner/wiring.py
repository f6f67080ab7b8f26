"""Builds the daemon's object graph from Settings. It wires; it computes nothing.

Three groups, each built by one function: the market path (simulator or Binance, listener,
aggregator, features, history), the decision path (regimes, gate, snapshot, decider, risk caps,
broker, routine, tick handler) and the bookkeeping (state, journals, heartbeat, watchdog, status).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from agent.risk import RiskConfig, risk_context
from agent.routine import DecisionRoutine
from agent.snapshot_builder import SnapshotBuilder
from core.bus import EventBus
from core.clock import Clock
from core.failpoints import Failpoints
from derivatives.config import DerivativesConfig
from derivatives.liquidation_stream import LiquidationStream
from derivatives.liquidations import LiquidationWindow
from derivatives.monitor import ContextField, DerivativesContext, DerivativesMonitor
from derivatives.sources import build_context_fields
from gate.conditions import build_metric_registry
from gate.gate import AdaptiveGate
from gate.metrics import MetricBoard
from learner.online import OnlineLearner
from market.aggregator import MultiTFAggregator
from market.ccxt_client import make_binanceusdm
from market.features import FeatureTracker
from market.history import CcxtCandleBackfill, OhlcvHistory, with_newer_closes
from market.listener import MarketListener
from market.ports import CandleBackfill, TickSource
from regime.crypto_hmm import CryptoRegimeModel
from regime.fred import build_macro_source
from regime.tracker import CryptoRegimeTracker, Offload
from regime.view import RegimeView
from runner.agent_wiring import Agents, build_agents
from runner.broker_wiring import BrokerParts, build_broker
from runner.config import Settings
from runner.crypto_runner import CryptoRunner
from state.journal import JsonlJournal
from state.store import RunnerStateStore
from tracker.tracker import PositionTracker

log = logging.getLogger(__name__)

TRADE_COLUMNS = ("at_ms", "client_order_id", "ticker", "side", "quantity", "price", "fee_usd")


@dataclass
class MarketPath:
    exchange: Any  # ccxt binanceusdm (Binance or the simulator), or the recording in replay
    aggregator: MultiTFAggregator
    features: FeatureTracker
    backfill: CcxtCandleBackfill
    history: OhlcvHistory
    ticks: TickSource  # the websocket listener, or RecordedTicks in replay
    ws_base_url: str | None = None  # the websocket the listener reads (None in replay)
    ws_path: str = "/market/stream"


@dataclass
class DecisionPath:
    derivatives: DerivativesMonitor
    liquidations: LiquidationStream | None  # live only: the recording has no liquidations
    gate: AdaptiveGate
    board: MetricBoard
    regimes: RegimeView
    broker_parts: BrokerParts
    tracker: PositionTracker
    learner: OnlineLearner
    snapshots: SnapshotBuilder
    agents: Agents
    routine: DecisionRoutine
    runner: CryptoRunner


def build_market_path(
    settings: Settings,
    clock: Clock,
    bus: EventBus,
    exchange: Any,
    make_ticks: Callable[[CandleBackfill], TickSource],
) -> MarketPath:
    """``exchange`` serves OHLCV (``make_binanceusdm`` live and under the simulator);
    ``make_ticks`` builds what publishes ``market.tick``, given the backfill it may repair with."""
    features = FeatureTracker()
    aggregator = MultiTFAggregator(bus, observers=[features])
    backfill = CcxtCandleBackfill(exchange, clock=clock)
    history = OhlcvHistory(
        exchange, clock, tickers=settings.market.tickers, days=settings.market.history_days
    )
    return MarketPath(exchange, aggregator, features, backfill, history, make_ticks(backfill))


def websocket_market_path(
    settings: Settings,
    clock: Clock,
    bus: EventBus,
    ws_base_url: str,
    rest_url: str | None,
    *,
    ws_path: str = "/market/stream",
) -> MarketPath:
    """The live and simulator market path: Binance's (or the simulator's) websocket and REST."""

    def listener(backfill: CandleBackfill) -> MarketListener:
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
        )

    market = build_market_path(settings, clock, bus, make_binanceusdm(rest_url), listener)
    market.ws_base_url, market.ws_path = ws_base_url, ws_path
    return market


def build_decision_path(
    settings: Settings,
    clock: Clock,
    bus: EventBus,
    market: MarketPath,
    store: RunnerStateStore,
    decisions_journal: JsonlJournal,
    *,
    sim_rest_url: str | None = None,
    live: bool = False,
    failpoints: Failpoints | None = None,
    context_fields: Sequence[ContextField] | None = None,
    memory: bool = True,
    fit_offload: Offload = asyncio.to_thread,
) -> DecisionPath:
    """``context_fields`` replaces the derivatives sources (replay reads the recording);
    ``memory=False`` keeps the agent's notes and the learner out of the snapshot; ``fit_offload``
    is how a regime fit leaves the event loop (replay runs it inline, for determinism)."""
    failpoints = failpoints or Failpoints()
    tickers = settings.market.tickers
    registry = build_metric_registry(tickers)
    gate = AdaptiveGate(clock, settings.gate, registry=registry)
    board = MetricBoard(registry)
    derivatives_config = _derivatives_config(settings.derivatives, sim_rest_url)
    liquidations = None
    window = None
    if sim_rest_url is None and context_fields is None and market.ws_base_url is not None:
        window = LiquidationWindow(derivatives_config.liquidation_cascade_usd)
        liquidations = LiquidationStream(
            clock,
            window,
            base_url=market.ws_base_url,
            tickers=tickers,
            path=market.ws_path,
            reconnect_base_secs=settings.market.reconnect_base_secs,
            reconnect_cap_secs=settings.market.reconnect_cap_secs,
        )
    if context_fields is None:
        context_fields = build_context_fields(
            derivatives_config, clock, tickers, market.exchange, liquidations=window
        )
    derivatives = DerivativesMonitor(
        clock,
        bus,
        context_fields,
        board=board,
        config=derivatives_config,
    )
    regime_tracker = CryptoRegimeTracker(
        clock,
        lambda: CryptoRegimeModel(settings.regime.hmm),
        settings.regime.refit_every_secs,
        offload=fit_offload,
    )
    macro = build_macro_source(clock, settings.regime, settings.fred_api_key)
    regimes = RegimeView(regime_tracker, macro, market.history, tickers)
    broker_parts = build_broker(settings, clock, bus, live=live, sim_rest_url=sim_rest_url)
    broker = broker_parts.broker

    def history_to_now(ticker: str) -> pd.DataFrame:
        return with_newer_closes(
            market.history.frame(ticker), market.aggregator.closed(ticker, market.history.timeframe)
        )

    agents = build_agents(settings, clock, bus, history_to_now, decisions_journal.append)
    tracker = PositionTracker(
        clock,
        bus,
        broker,
        store,
        reviewer=agents.reviewer,  # None without a key: the fallback score decides
        price=market.aggregator.last_price,
        regime=lambda ticker: regimes.crypto(ticker).label.value,
        config=settings.tracker,
    )
    learner = OnlineLearner(settings.state_dir / "models" / "online_learner.json")
    snapshots = SnapshotBuilder(
        clock,
        tickers=tickers,
        market=market.aggregator,
        features=market.features,
        broker=broker,
        agent_memory=(lambda: store.current.agent_memory) if memory else (lambda: ""),
        peak_prices=lambda: store.current.trailing_highs,
        regime=regimes.snapshot,
        context_sources=[DerivativesContext(derivatives)],
        learner=learner if memory else None,
    )
    routine = DecisionRoutine(
        clock,
        bus,
        build_snapshot=snapshots.build,
        decider=agents.decider,
        agent_status=agents.decider.status,
        risk_context=lambda snapshot: risk_context(snapshot, tickers),
        risk_config=RiskConfig(),
        broker=broker,
        gate=gate,
        journal=decisions_journal,
        store=store,
        failpoint=failpoints.hit,
        before_execution=tracker.filter_sells,
        after_execution=tracker.on_executed,
    )
    runner = CryptoRunner(
        bus,
        aggregator=market.aggregator,
        features=market.features,
        board=board,
        gate=gate,
        decisions=routine,
        price_sinks=broker_parts.price_sinks,
    )
    return DecisionPath(
        derivatives,
        liquidations,
        gate,
        board,
        regimes,
        broker_parts,
        tracker,
        learner,
        snapshots,
        agents,
        routine,
        runner,
    )


def _derivatives_config(config: DerivativesConfig, sim_rest_url: str | None) -> DerivativesConfig:
    """Against the simulator: Fear & Greed from its /fng/, PAXG from its /api/v3/klines; outside
    web sources off (no network), each said so in the snapshot."""
    if sim_rest_url is None:
        return config
    return config.model_copy(
        update={
            "fng_base_url": sim_rest_url,
            "defillama_base_url": None,
            "coingecko_base_url": None,
            "etf_flow_url": None,
            "binance_spot_url": sim_rest_url,  # PAXGUSDT from the recording
        }
    )


__all__ = [
    "TRADE_COLUMNS",
    "DecisionPath",
    "MarketPath",
    "build_decision_path",
    "build_market_path",
    "websocket_market_path",
]
