"""``/metrics``: the daemon in Prometheus' text format, with the official ``prometheus_client``.

Two kinds of figures. Counts the daemon already keeps (ticks, rejected frames, bus queues, gate
passes, Claude usage, breaker, budget, loop restarts, journal faults) are read at scrape time from
a ``DaemonCounts`` sample: nothing on the hot path. What only an event tells (decisions by decider
and reason, their latency, fills, exits) is counted here by bus and routine observers.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    disable_created_metrics,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from pydantic import BaseModel, ConfigDict, Field

from api.models import AccountBody, AgentBody
from core.events import Event, OrderFilled, PositionExit

#: real seconds; a fallback decision takes milliseconds, a Claude one seconds
# a rule-based decision takes milliseconds, a model's seconds: fine steps at both ends, so a
# quantile interpolated inside a bucket (histogram_quantile) is within a millisecond or so
LATENCY_BUCKETS_SECS = (
    0.001, 0.002, 0.003, 0.004, 0.005, 0.006, 0.007, 0.008, 0.009, 0.01, 0.0125, 0.015, 0.02,
    0.025, 0.03, 0.04, 0.05, 0.075, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120,
)  # fmt: skip
BREAKER_STATES = ("closed", "open", "half_open")


class DaemonCounts(BaseModel):
    """The daemon's own running counts, read at scrape time."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ticks: int
    frames: int
    rejected_frames: dict[str, int] = Field(default_factory=dict)  # by reason
    reconnects: dict[str, int] = Field(default_factory=dict)  # by cause
    bus_queue_depth: dict[str, int] = Field(default_factory=dict)  # by topic:subscriber
    bus_dropped: dict[str, int] = Field(default_factory=dict)
    bus_failed: dict[str, int] = Field(default_factory=dict)
    gate_passes: dict[str, int] = Field(default_factory=dict)  # by layer
    gate_evaluations: int = 0
    loop_restarts: dict[str, int] = Field(default_factory=dict)  # by loop
    journal_failed_writes: int = 0
    journal_degraded_lines: int = 0


def reason_label(reason: str | None) -> str:
    """A bounded label: ``breaker_open: next trial in 540 s`` -> ``breaker_open``."""
    return (reason or "none").split(":", 1)[0].strip()[:40] or "none"


class DaemonMetrics:
    """The registry of one daemon (not the process-global one: tests build several)."""

    def __init__(self) -> None:
        disable_created_metrics()  # type: ignore[no-untyped-call]  # *_created series: noise for a scrape of one daemon
        self.registry = CollectorRegistry(auto_describe=True)
        self.decisions = Counter(
            "vigil_decisions",
            "Decisions journaled, by decider and the reason it decided",
            ["decided_by", "reason"],
            registry=self.registry,
        )
        self.decision_errors = Counter(
            "vigil_decision_errors", "Decisions that failed part-way", registry=self.registry
        )
        self.latency = Histogram(
            "vigil_decision_latency_seconds",
            "Real seconds from a decision's start to its journal line, by decider",
            ["decided_by"],
            buckets=LATENCY_BUCKETS_SECS,
            registry=self.registry,
        )
        self.fills = Counter(
            "vigil_fills", "Order fills, by side", ["side"], registry=self.registry
        )
        self.exits = Counter(
            "vigil_position_exits", "Position exits, by reason", ["reason"], registry=self.registry
        )
        self._state = _ScrapeState()
        self.registry.register(self._state)

    def on_decision(self, line: Mapping[str, Any], elapsed_secs: float) -> None:
        decided_by = str(line.get("decided_by") or "none")
        self.decisions.labels(decided_by, reason_label(line.get("decider_reason"))).inc()
        self.latency.labels(decided_by).observe(elapsed_secs)
        if line.get("error"):
            self.decision_errors.inc()

    def on_event(self, event: Event) -> None:
        if isinstance(event, OrderFilled):
            if not event.recovered:  # a fill announced again on start was counted before
                self.fills.labels(event.side).inc()
        elif isinstance(event, PositionExit):
            self.exits.labels(reason_label(event.reason)).inc()

    def render(
        self, counts: DaemonCounts | None, agent: AgentBody | None, account: AccountBody | None
    ) -> bytes:
        from prometheus_client import generate_latest

        self._state.counts, self._state.agent, self._state.account = counts, agent, account
        return generate_latest(self.registry)


class _ScrapeState(Collector):
    """The scrape-time figures, from the last sample handed to ``render``."""

    def __init__(self) -> None:
        self.counts: DaemonCounts | None = None
        self.agent: AgentBody | None = None
        self.account: AccountBody | None = None

    def describe(self) -> Iterator[Metric]:
        return iter(())  # unchecked: the families depend on what the sample holds

    def collect(self) -> Iterator[Metric]:
        if self.counts is not None:
            yield from _count_families(self.counts)
        if self.agent is not None:
            yield from _agent_families(self.agent)
        if self.account is not None and "account" not in self.account.unavailable:
            yield from _account_families(self.account)  # unknown: not 0 positions


def _counter(name: str, doc: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(name, doc, value=value)


def _labelled(
    kind: type[CounterMetricFamily] | type[GaugeMetricFamily],
    name: str,
    doc: str,
    label: str,
    values: Mapping[str, float],
) -> Metric:
    family = kind(name, doc, labels=[label])
    for key, value in sorted(values.items()):
        family.add_metric([key], value)
    return family


def _count_families(c: DaemonCounts) -> Iterator[Metric]:
    yield _counter("vigil_ticks", "Market ticks published", c.ticks)
    yield _counter("vigil_frames", "Websocket frames received", c.frames)
    yield _labelled(
        CounterMetricFamily, "vigil_rejected_frames", "Frames dropped, by reason", "reason",
        c.rejected_frames,
    )  # fmt: skip
    yield _labelled(
        CounterMetricFamily, "vigil_reconnects", "Websocket reconnects, by cause", "cause",
        c.reconnects,
    )  # fmt: skip
    yield _labelled(
        GaugeMetricFamily, "vigil_bus_queue_depth", "Events waiting per queued subscriber",
        "subscriber", c.bus_queue_depth,
    )  # fmt: skip
    yield _labelled(
        CounterMetricFamily, "vigil_bus_dropped", "Events dropped per subscriber (queue full)",
        "subscriber", c.bus_dropped,
    )  # fmt: skip
    yield _labelled(
        CounterMetricFamily, "vigil_bus_handler_failures", "Handler errors per subscriber",
        "subscriber", c.bus_failed,
    )  # fmt: skip
    yield _counter("vigil_gate_evaluations", "Gate evaluations", c.gate_evaluations)
    yield _labelled(
        CounterMetricFamily, "vigil_gate_passes", "Gate passes, by layer", "layer", c.gate_passes
    )
    yield _labelled(
        CounterMetricFamily, "vigil_loop_restarts", "Supervised loop restarts, by loop", "loop",
        c.loop_restarts,
    )  # fmt: skip
    yield _counter("vigil_journal_write_errors", "Journal writes failed", c.journal_failed_writes)
    yield _counter(
        "vigil_journal_degraded_lines", "Journal lines written degraded", c.journal_degraded_lines
    )


def _agent_families(a: AgentBody) -> Iterator[Metric]:
    yield _counter("vigil_claude_calls", "Claude calls", a.calls)
    yield _counter("vigil_claude_errors", "Claude calls that failed", a.failed_calls)
    yield _labelled(
        CounterMetricFamily, "vigil_claude_tokens", "Claude tokens, by kind", "kind",
        {"input": a.input_tokens, "output": a.output_tokens},
    )  # fmt: skip
    yield _counter("vigil_claude_cost_usd", "Claude cost, USD", a.cost_total_usd)
    state = GaugeMetricFamily(
        "vigil_breaker_state", "The Claude circuit breaker (1 = current state)", labels=["state"]
    )
    for name in BREAKER_STATES:
        state.add_metric([name], 1.0 if a.breaker == name else 0.0)
    yield state
    if a.budget_left_today_usd is not None:
        yield GaugeMetricFamily(
            "vigil_budget_left_usd", "Claude budget left today, USD", value=a.budget_left_today_usd
        )


def _account_families(acc: AccountBody) -> Iterator[Metric]:
    if acc.equity_usd is not None:
        yield GaugeMetricFamily("vigil_equity_usd", "Portfolio value, USD", value=acc.equity_usd)
        exposure = sum(p.notional_usd for p in acc.positions)
        frac = exposure / acc.equity_usd if acc.equity_usd > 0 else 0.0
        yield GaugeMetricFamily(
            "vigil_exposure_frac", "Open positions' notional / equity", value=frac
        )
    yield GaugeMetricFamily("vigil_open_positions", "Open positions", value=len(acc.positions))


__all__ = ["DaemonCounts", "DaemonMetrics", "reason_label"]
