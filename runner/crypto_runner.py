"""CryptoRunner: the tick handler. It wires the hot path; each step is computed elsewhere.

market.tick -> aggregator.update (candles, closes, tick features), called here first and explicitly
  -> metric board (the gate's view of named metrics)
  -> price sink (the paper broker fills limits and marks positions)
  -> gate.evaluate -> on a pass: ``gate.wake`` on the bus and a decision request.
A ``decision.requested`` (watchdog, operator) goes straight to the decision routine.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Protocol

from core.bus import EventBus
from core.events import DecisionRequested, Event, GateWake, MarketTick
from gate.gate import AdaptiveGate
from gate.metrics import MetricBoard
from market.features import TickFeatures

log = logging.getLogger(__name__)


class TickConsumer(Protocol):
    """The aggregator: updates candles (publishing closes) and the tick features."""

    def update(self, tick: MarketTick) -> None: ...


class FeaturesView(Protocol):
    def features(self, ticker: str) -> TickFeatures | None: ...


class DecisionRequests(Protocol):
    def request(self, reasons: Sequence[str]) -> None: ...


PriceSink = Callable[[MarketTick], None]


class CryptoRunner:
    def __init__(
        self,
        bus: EventBus,
        *,
        aggregator: TickConsumer,
        features: FeaturesView,
        board: MetricBoard,
        gate: AdaptiveGate,
        decisions: DecisionRequests,
        price_sinks: Sequence[PriceSink] = (),
    ) -> None:
        self._bus = bus
        self._aggregator = aggregator
        self._features = features
        self._board = board
        self._gate = gate
        self._decisions = decisions
        self._price_sinks = tuple(price_sinks)
        # bound once: the tick path runs them on every tick of a year's replay
        self._update = aggregator.update
        self._features_of = features.features
        self._update_features = board.update_features
        self._evaluate = gate.evaluate
        self.wakes = 0

    def handle_tick(self, event: Event) -> None:
        tick = event if type(event) is MarketTick else None
        if tick is None:
            raise TypeError(f"tick handler got {type(event).__name__}")
        self._update(tick)  # first: everything below sees the tick's candles
        features = self._features_of(tick.ticker)
        if features is not None:
            self._update_features(features)
        for sink in self._price_sinks:
            sink(tick)
        verdict = self._evaluate(tick, features, self._board)
        if verdict.passed:
            self.wakes += 1
            self._bus.publish(GateWake(at_ms=tick.event_time_ms, reasons=verdict.reasons))
            self._decisions.request(verdict.reasons)

    def handle_request(self, event: Event) -> None:
        if not isinstance(event, DecisionRequested):
            raise TypeError(f"request handler got {type(event).__name__}")
        self._decisions.request([event.reason])
