"""Every bus subscription of the daemon, in one table, the way ``supervise()`` lists its loops.

No domain object subscribes itself: each exposes handlers, and this table says which topic feeds
which handler. Within a topic, inline handlers run in the order of the table (the bus keeps
subscription order), so the order of the rows below is behaviour:

- ``market.tick``: the tick path first (aggregator -> features -> gate -> decision request, all
  called explicitly by ``CryptoRunner.handle_tick``), then the watchdog's liveness mark.
- ``order.filled``: the trades journal first, then the ``after_fill`` failpoint, so a kill there
  has the fill row written (the restart tests rely on it).
- ``position.exit``: the ``after_exit`` failpoint. The learner is not on the bus: it takes each
  exit from the durable exits outbox (``runner.wiring.exits_outbox``) before the event is published.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

from agent.debate import DebateDecider
from core.bus import AsyncHandler, EventBus, InlineHandler, Overflow
from core.events import AgentFailure, CandleClosed, Event, OrderFilled, Topic
from core.failpoints import Failpoints
from runner.memory_wiring import MemoryParts
from runner.watchdog import Watchdog
from runner.wiring import DecisionPath
from state.journal import CsvJournal, JsonlJournal, read_csv_rows
from state.records import AgentFailureRecord, TradeRow

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Inline:
    """Called synchronously inside ``publish`` (cheap work only)."""

    topic: str
    handler: InlineHandler
    name: str


@dataclass(frozen=True)
class Queued:
    """Fed through a bounded queue by its own consumer task."""

    topic: str
    handler: AsyncHandler
    name: str
    maxsize: int
    overflow: Overflow
    key: Callable[[Event], Hashable]


Subscription = Inline | Queued


def daemon_subscriptions(
    decision: DecisionPath,
    *,
    decisions_journal: JsonlJournal,
    trades_journal: CsvJournal,
    watchdog: Watchdog,
    failpoints: Failpoints,
) -> list[Subscription]:
    """The table for a wired daemon (live, simulator and replay alike)."""
    return [
        Inline(Topic.MARKET_TICK, decision.runner.handle_tick, "tick_path"),
        Inline(Topic.MARKET_TICK, watchdog.on_market_data, "watchdog"),
        Inline(Topic.DECISION_REQUESTED, decision.runner.handle_request, "decision_requests"),
        # inline: a 4h close's regime refresh is pending before the decision it triggers can start
        Inline(Topic.CANDLE_CLOSED, decision.regimes.on_close_observed, "regime_pending"),
        Queued(
            Topic.CANDLE_CLOSED,
            decision.regimes.on_candle_closed,
            "history_and_regime",
            maxsize=64,
            overflow=Overflow.COALESCE,
            key=_stream_key,
        ),
        Inline(Topic.CANDLE_CLOSED, log_candle_close, "log_candle_close"),
        Inline(Topic.POSITION_OPENED, decision.tracker.on_position_opened, "tracker"),
        Inline(Topic.ORDER_FILLED, trades_row_writer(trades_journal), "trades_journal"),
        Inline(Topic.ORDER_FILLED, lambda _e: failpoints.hit("after_fill"), "failpoint"),
        *memory_subscriptions(decision.memory),
        Inline(Topic.POSITION_EXIT, lambda _e: failpoints.hit("after_exit"), "failpoint"),
        *_debate_rows(decision),
        Inline(
            Topic.AGENT_FAILURE, agent_failure_writer(decisions_journal), "agent_failure_journal"
        ),
    ]


def _debate_rows(decision: DecisionPath) -> list[Subscription]:
    """The debate decider reflects on each exit (at the start of its next decision)."""
    decider = decision.agents.decider
    if isinstance(decider, DebateDecider):
        return [Inline(Topic.POSITION_EXIT, decider.on_position_exit, "debate_reflection")]
    return []


def memory_subscriptions(memory: MemoryParts | None) -> list[Subscription]:
    """The trading memory's rows: decisions, fills, entries and exits are recorded inline into its
    durable outbox (an exit's row is committed before the ``after_exit`` failpoint); one queued,
    coalescing wake-up per exit or decision drains the outbox into the store off the tick path."""
    writer = memory.writer if memory is not None else None
    if writer is None:
        return []  # memory off, or read-only (write_back = false)
    wake: list[Subscription] = [
        Queued(
            topic,
            writer.on_wake,
            "memory_writer",
            maxsize=1,
            overflow=Overflow.COALESCE,
            key=lambda _event: "wake",  # one pending wake-up drains everything
        )
        for topic in (Topic.POSITION_EXIT, Topic.DECISION_MADE)
    ]
    return [
        Inline(Topic.DECISION_MADE, writer.on_decision, "memory_decisions"),
        Inline(Topic.ORDER_FILLED, writer.on_fill, "memory_fees"),
        Inline(Topic.POSITION_OPENED, writer.on_opened, "memory_entries"),
        Inline(Topic.POSITION_EXIT, writer.on_exit, "memory_outbox"),
        *wake,
    ]


def subscribe_all(bus: EventBus, table: Sequence[Subscription]) -> None:
    for row in table:
        if isinstance(row, Inline):
            bus.subscribe(row.topic, row.handler, name=row.name)
        else:
            bus.subscribe_queued(
                row.topic,
                row.handler,
                name=row.name,
                maxsize=row.maxsize,
                overflow=row.overflow,
                key=row.key,
            )


def trades_row_writer(trades: CsvJournal) -> InlineHandler:
    """One trades.csv row per fill. Brokers announce their recorded fills again on start (a kill
    can fall between a fill and its row), so fills already in the file are skipped by client
    order id: each fill gets exactly one row."""
    journaled = {row["client_order_id"] for row in read_csv_rows(trades.path)}

    def on_fill(event: Event) -> None:
        if not isinstance(event, OrderFilled) or event.client_order_id in journaled:
            return
        row = TradeRow(
            at_ms=event.at_ms,
            client_order_id=event.client_order_id,
            ticker=event.ticker,
            side=event.side,
            quantity=event.quantity,
            price=event.price,
            fee_usd=event.fee,
            fee_estimated=event.fee_estimated,
        )
        trades.append(row.as_row())
        journaled.add(event.client_order_id)

    return on_fill


def agent_failure_writer(decisions: JsonlJournal) -> InlineHandler:
    """Every agent failure is a journal line too (decision failures also sit in their decision's
    ``attempts``; the tracker's review failures are only here)."""

    def on_failure(event: Event) -> None:
        if isinstance(event, AgentFailure):
            line = AgentFailureRecord.model_validate(event.model_dump(mode="json"))
            decisions.append(line.as_line())

    return on_failure


def log_candle_close(event: Event) -> None:
    if not isinstance(event, CandleClosed):
        return
    c = event.candle
    level = logging.DEBUG if event.timeframe == "15m" else logging.INFO
    log.log(
        level,
        "%s %s closed o=%g h=%g l=%g c=%g v=%g",
        event.ticker,
        event.timeframe,
        c.open,
        c.high,
        c.low,
        c.close,
        c.volume,
    )


def _stream_key(event: Event) -> tuple[str, str]:
    if isinstance(event, CandleClosed):
        return (event.ticker, event.timeframe)
    return ("", event.topic)


__all__ = [
    "Inline",
    "Queued",
    "Subscription",
    "agent_failure_writer",
    "daemon_subscriptions",
    "log_candle_close",
    "subscribe_all",
    "trades_row_writer",
]
