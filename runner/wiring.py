"""Builds the daemon's object graph from Settings. It wires; it computes nothing.

Three groups, each built by one function: the market path (``runner.market_wiring``: simulator or
Binance, listener, aggregator, features, history), the decision path here (regimes, gate, snapshot,
decider, risk caps, broker, routine, tick handler) and the bookkeeping (``runner.supervision``:
journals, heartbeat, watchdog, status, loops, shutdown).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from agent.debate import DebateDecider
from agent.decision_context import DecisionContext
from agent.org_caps import OrganisationCaps
from agent.risk import RiskConfig, risk_context
from agent.routine import DecisionRoutine
from agent.snapshot_builder import SnapshotBuilder
from broker.port import Broker
from broker.trading_state import TradingSwitch
from core.bus import EventBus
from core.clock import Clock
from core.errors import RefuseToStartError
from core.events import PositionExit
from core.failpoints import Failpoints
from derivatives.config import DerivativesConfig
from derivatives.liquidation_stream import LiquidationStream
from derivatives.liquidations import LiquidationWindow
from derivatives.monitor import DerivativesContext, DerivativesMonitor
from derivatives.sources import build_context_fields
from gate.conditions import build_metric_registry
from gate.gate import AdaptiveGate
from gate.metrics import MetricBoard
from learner.online import OnlineLearner
from market.closes import ClosesToNow
from market.features import FeatureTracker
from memory.tiers import OrganisationTier, TierError
from regime.crypto_hmm import CryptoRegimeModel
from regime.fit_cache import FitCache
from regime.fred import build_macro_source
from regime.hmm_fit import fit_hmm
from regime.tracker import CryptoRegimeTracker
from regime.view import RegimeView
from runner.agent_wiring import Agents, build_agents
from runner.broker_wiring import BrokerParts, build_broker
from runner.config import Settings
from runner.context_wiring import build_decision_context
from runner.crypto_runner import CryptoRunner
from runner.market_wiring import MarketPath, Ports
from runner.memory_wiring import MemoryParts, build_memory, build_reflector
from state.journal import JsonlJournal
from state.outbox import Outbox, OutboxEntry
from state.store import RunnerStateStore
from tracker.tracker import PositionTracker

log = logging.getLogger(__name__)


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
    context: DecisionContext | None
    runner: CryptoRunner
    trading: TradingSwitch
    exits: Outbox | None = None  # the exits outbox the learner consumes
    memory: MemoryParts | None = None


def build_decision_path(
    settings: Settings,
    clock: Clock,
    bus: EventBus,
    market: MarketPath,
    store: RunnerStateStore,
    decisions_journal: JsonlJournal,
    ports: Ports,
    failpoints: Failpoints | None = None,
) -> DecisionPath:
    """Regimes, gate, derivatives, broker, tracker, learner, snapshot, deciders and the routine."""
    registry = build_metric_registry(settings.market.tickers)
    gate = AdaptiveGate(clock, settings.gate, registry=registry)
    board = MetricBoard(registry)
    derivatives, liquidations = _derivatives(settings, clock, bus, market, board, ports)
    regimes = _regimes(settings, clock, market, ports)
    broker_parts = build_broker(
        settings, clock, bus, live=ports.live_orders, sim_rest_url=ports.sim_rest_url
    )
    broker = broker_parts.broker

    # the 4h closes to now, rebuilt at a close or refresh only (not per decision)
    history_to_now = ClosesToNow(market.history, market.aggregator)
    agents = build_agents(
        settings,
        clock,
        bus,
        history_to_now,
        decisions_journal.append,
        memory=ports.memory,
        jitter=ports.jitter,
    )
    trading = TradingSwitch(clock, store, decisions_journal.append)
    failpoint = (failpoints or Failpoints()).hit
    learner = OnlineLearner(settings.state_dir / "models" / "online_learner.json")
    exits = exits_outbox(settings, learner)
    tracker = _tracker(
        settings, clock, bus, market, broker, store, agents, regimes, trading, exits, failpoint,
        ports.jitter,
    )  # fmt: skip
    memory = _memory(settings, clock, agents, decisions_journal, ports)
    snapshots = _snapshots(
        settings, clock, market, broker, store, regimes, derivatives, learner, ports, memory
    )
    context = build_decision_context(
        settings, clock, agents, memory=ports.memory, person_notes=lambda: store.current.notes,
        insights=memory.insight_source(clock), analysts_pool=ports.analysts_pool,
        journal=decisions_journal.append,
    )  # fmt: skip
    routine = _routine(
        settings, clock, bus, snapshots, agents, broker, gate, decisions_journal, store, tracker,
        failpoints, trading, context,
    )  # fmt: skip
    runner = _tick_handler(bus, market, board, gate, routine, broker_parts)
    return DecisionPath(
        derivatives, liquidations, gate, board, regimes, broker_parts,
        tracker, learner, snapshots, agents, routine, context, runner, trading, exits, memory,
    )  # fmt: skip


def _tick_handler(
    bus: EventBus,
    market: MarketPath,
    board: MetricBoard,
    gate: AdaptiveGate,
    routine: DecisionRoutine,
    broker_parts: BrokerParts,
) -> CryptoRunner:
    """The one explicit tick path: aggregator, features, metric board, gate, then the routine."""
    return CryptoRunner(
        bus,
        aggregator=market.aggregator,
        features=market.features,
        board=board,
        gate=gate,
        decisions=routine,
        price_sinks=broker_parts.price_sinks,
    )


def _tracker(
    settings: Settings,
    clock: Clock,
    bus: EventBus,
    market: MarketPath,
    broker: Broker,
    store: RunnerStateStore,
    agents: Agents,
    regimes: RegimeView,
    trading: TradingSwitch,
    exits: Outbox,
    failpoint: Callable[[str], None],
    jitter: random.Random,
) -> PositionTracker:
    return PositionTracker(
        clock,
        bus,
        broker,
        store,
        reviewer=agents.reviewer,  # None without a key: the fallback score decides
        price=market.aggregator.last_price,
        regime=lambda ticker: regimes.crypto(ticker).label.value,
        config=settings.tracker,
        btc_change_1h_pct=lambda: _change_1h_pct(market.features, settings.tracker.btc_ticker),
        trading=trading,
        record_exit=lambda key, event: record_exit(exits, key, event, failpoint),
        failpoint=failpoint,
        rng=jitter,
    )


def _memory(
    settings: Settings, clock: Clock, agents: Agents, journal: JsonlJournal, ports: Ports
) -> MemoryParts:
    """The trading memory, with a reflector that writes each exit's lesson (Claude's when keyed)."""
    reviewer = agents.reviewer
    reflector = build_reflector(
        settings,
        clock,
        agents.client,
        reviewer.ledger if reviewer is not None else None,
        journal.append,
    )
    memory = build_memory(
        settings, clock, enabled=ports.memory, reflector=reflector, jitter=ports.jitter
    )
    if isinstance(agents.decider, DebateDecider):  # the debate remembers in the same graph
        agents.decider.use_long_term(*memory.debate_memory(enabled=ports.memory))
    return memory


def exits_outbox(settings: Settings, learner: OnlineLearner) -> Outbox:
    """The durable exit -> learner (and, later, trading memory) hand-off (``state.outbox``).
    What a previous run recorded and the learner did not take yet is delivered now."""
    outbox = Outbox(settings.state_dir / "outbox" / "exits.jsonl")
    outbox.load()

    def learn(entry: OutboxEntry) -> None:
        try:
            event = PositionExit.model_validate(entry.payload)
            learner.on_position_exit(event, trade_id=entry.key)
        except ValueError as exc:
            # a damaged or edited exit (a non-finite pnl, a field of the wrong kind) is refused
            # the same way at every delivery: raised, it held every later exit back for good
            log.error("exits outbox: exit %s cannot be learned, passed over (%s)", entry.key, exc)

    outbox.subscribe("learner", learn)
    delivered = outbox.deliver()
    if delivered:
        log.warning("exits outbox: delivered %d exit(s) a previous run had not", delivered)
    return outbox


def record_exit(
    outbox: Outbox, key: str, event: PositionExit, failpoint: Callable[[str], None]
) -> None:
    """Make the exit durable, then hand it to the consumers (each acknowledges what it took)."""
    outbox.append(key, event.topic, event.at_ms, event.model_dump(mode="json"))
    failpoint("after_exit_outboxed")
    outbox.deliver()


def _derivatives(
    settings: Settings,
    clock: Clock,
    bus: EventBus,
    market: MarketPath,
    board: MetricBoard,
    ports: Ports,
) -> tuple[DerivativesMonitor, LiquidationStream | None]:
    """The derivatives monitor over its context sources, and the liquidation stream (live only)."""
    tickers = settings.market.tickers
    config = _derivatives_config(settings.derivatives, ports.sim_rest_url)
    liquidations = window = None
    if ports.liquidations_ws is not None and ports.context_fields is None:
        window = LiquidationWindow(config.liquidation_cascade_usd)
        base_url, path = ports.liquidations_ws
        liquidations = LiquidationStream(
            clock,
            window,
            base_url=base_url,
            tickers=tickers,
            path=path,
            reconnect_base_secs=settings.market.reconnect_base_secs,
            reconnect_cap_secs=settings.market.reconnect_cap_secs,
            rng=ports.jitter,
        )
    if ports.context_fields is not None:
        fields = ports.context_fields(config, window)
    else:
        fields = build_context_fields(
            config, clock, tickers, market.exchange, liquidations=window, rand=ports.jitter.random
        )
    monitor = DerivativesMonitor(
        clock, bus, fields, board=board, config=config, rand=ports.jitter.random
    )
    return monitor, liquidations


def _routine(
    settings: Settings,
    clock: Clock,
    bus: EventBus,
    snapshots: SnapshotBuilder,
    agents: Agents,
    broker: Broker,
    gate: AdaptiveGate,
    journal: JsonlJournal,
    store: RunnerStateStore,
    tracker: PositionTracker,
    failpoints: Failpoints | None,
    trading: TradingSwitch,
    context: DecisionContext | None,
) -> DecisionRoutine:
    """Snapshot -> decider -> caps -> broker -> tracker -> gate -> journal -> state. The caps are
    this instance's, tightened at every decision by the organisation's policy when one is set."""
    tickers = settings.market.tickers
    org = _organisation_caps(settings.context.organisation_path)
    return DecisionRoutine(
        clock,
        bus,
        build_snapshot=snapshots.build,
        decider=agents.decider,
        agent_status=agents.decider.status,
        risk_context=lambda snapshot: risk_context(snapshot, org.whitelist(tickers)),
        risk_config=org.config,
        broker=broker,
        gate=gate,
        journal=journal,
        store=store,
        failpoint=(failpoints or Failpoints()).hit,
        before_execution=tracker.filter_sells,
        after_execution=tracker.on_executed,
        trading=trading,
        context=context,
    )


def _organisation_caps(source: Path | None) -> OrganisationCaps:
    """The organisation's caps over this instance's; a configured policy that cannot be read at
    start refuses the start. After it, a broken edit keeps the last good policy in force, but at
    start there is none: the daemon used to trade on its own looser caps, with a warning at each
    decision, until someone noticed."""
    tier = OrganisationTier(source)
    if source is not None:
        try:
            tier.load()
        except TierError as exc:
            raise RefuseToStartError(
                f"context.organisation_path: {exc}. Its caps and bans could not apply; fix the "
                "policy, or unset the setting to trade on this instance's caps alone"
            ) from None
    return OrganisationCaps(tier, RiskConfig())


def _snapshots(
    settings: Settings,
    clock: Clock,
    market: MarketPath,
    broker: Broker,
    store: RunnerStateStore,
    regimes: RegimeView,
    derivatives: DerivativesMonitor,
    learner: OnlineLearner,
    ports: Ports,
    memory: MemoryParts,
) -> SnapshotBuilder:
    """The snapshot builder over the daemon's views; without memory, no notes and no learner."""
    return SnapshotBuilder(
        clock,
        tickers=settings.market.tickers,
        market=market.aggregator,
        features=market.features,
        broker=broker,
        agent_memory=(lambda: store.current.agent_memory) if ports.memory else (lambda: ""),
        peak_prices=lambda: store.current.trailing_highs,
        regime=regimes.snapshot,
        context_sources=[DerivativesContext(derivatives)],
        learner=learner if ports.memory else None,
        draw_seed=settings.regime.hmm.seed,
        insights=memory.insights,
    )


def _regimes(settings: Settings, clock: Clock, market: MarketPath, ports: Ports) -> RegimeView:
    folder = settings.regime.fit_cache_dir
    cache = FitCache(folder) if folder is not None else None
    fitter = ports.fit_pool.fit if ports.fit_pool is not None else fit_hmm
    tracker = CryptoRegimeTracker(
        clock,
        lambda: CryptoRegimeModel(
            settings.regime.hmm, cache=cache, ahead=ports.fit_ahead, fitter=fitter
        ),
        settings.regime.refit_every_secs,
        offload=ports.fit_offload,
        ahead=ports.fit_ahead,
    )
    macro = build_macro_source(clock, settings.regime, settings.fred_api_key)
    return RegimeView(
        tracker, macro, market.history, settings.market.tickers, clock=clock, fits=ports.fit_pool
    )


def _change_1h_pct(features: FeatureTracker, ticker: str) -> float | None:
    feats = features.features(ticker)
    return feats.change_1h_pct if feats is not None else None


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
    "DecisionPath",
    "build_decision_path",
    "exits_outbox",
    "record_exit",
]
