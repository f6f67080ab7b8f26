"""Helpers shared by the tracker tests (no tests here): a tracker over a real PaperBroker and a real
RunnerStateStore on a VirtualClock, positions opened through real fills, scripted reviewers."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from broker.paper import PaperBroker
from broker.port import Action, OrderIntent
from core.bus import EventBus
from core.clock import VirtualClock
from core.events import Event, PositionExit, Topic
from state.store import RunnerStateStore
from tracker.config import TrackerConfig
from tracker.ports import PositionReview, ReviewAction, ReviewVerdict
from tracker.tracker import PositionTracker

T0_MS = 1_740_787_200_000  # 2025-03-01 00:00 UTC
BTC, ETH, SOL = "BTC/USDT", "ETH/USDT", "SOL/USDT"


@dataclass
class Rig:
    clock: VirtualClock
    bus: EventBus
    broker: PaperBroker
    store: RunnerStateStore
    tracker: PositionTracker
    state_path: Path
    regimes: dict[str, str]
    exits: list[PositionExit] = field(default_factory=list)

    def set_price(self, ticker: str, price: float) -> None:
        self.broker.on_market_price(ticker, price, at_ms=self.clock.now_ms())

    async def open_position(
        self, ticker: str, price: float, notional_usd: float = 1000.0, **signals: float
    ) -> None:
        """BUY at ``price`` and fill it (the market trades just below the limit)."""
        intent = OrderIntent(
            decision_id=f"open-{ticker}-{self.clock.now_ms()}",
            ticker=ticker,
            action=Action.BUY,
            notional_usd=notional_usd,
            reference_price=price,
            position_pct=0.1,
            signal_weights=dict(signals),
        )
        (placed,) = await self.broker.execute_decisions([intent])
        assert placed.status == "open"
        await self.clock.advance(1)
        self.set_price(ticker, price * 0.9999)
        self.set_price(ticker, price)
        assert self.broker.order(placed.client_order_id).status == "filled"  # type: ignore[union-attr]


def make_rig(
    tmp_path: Path,
    *,
    reviewer: object | None = None,
    config: TrackerConfig | None = None,
    regimes: dict[str, str] | None = None,
    broker: PaperBroker | None = None,
    broker_factory: Callable[[VirtualClock, EventBus], PaperBroker] | None = None,
    clock: VirtualClock | None = None,
    attach: bool = True,
    rng: random.Random | None = None,
) -> Rig:
    """A fresh bus and store on ``tmp_path``; the broker is ``broker`` (a restart keeps the
    account), else ``broker_factory(clock, bus)``, else a 10 000 USD paper account."""
    clock = clock or VirtualClock(T0_MS)
    bus = EventBus()
    if broker is None:
        factory = broker_factory or (lambda c, b: PaperBroker(c, starting_cash_usd=10_000, bus=b))
        broker = factory(clock, bus)
    state_path = tmp_path / "runner_state.json"
    store = RunnerStateStore(state_path, clock)
    store.load()
    regime_map = regimes if regimes is not None else {}

    def price(ticker: str) -> float | None:
        mark = broker.mark(ticker)
        return None if mark is None else mark.price

    tracker = PositionTracker(
        clock,
        bus,
        broker,
        store,
        reviewer=reviewer,  # type: ignore[arg-type]
        price=price,
        regime=lambda t: regime_map.get(t, "low_volatility_goldilocks"),
        config=config,
        rng=rng,
    )
    if attach:
        bus.subscribe(Topic.POSITION_OPENED, tracker.on_position_opened, name="tracker")
    rig = Rig(clock, bus, broker, store, tracker, state_path, regime_map)
    bus.subscribe(Topic.POSITION_EXIT, lambda e: rig.exits.append(_exit(e)), name="test_exits")
    return rig


def _exit(event: Event) -> PositionExit:
    assert isinstance(event, PositionExit)
    return event


class ScriptedReviewer:
    """Answers every review with the scripted action per ticker; records what it was shown."""

    def __init__(self, actions: Mapping[str, ReviewAction]) -> None:
        self.actions = dict(actions)
        self.seen: list[tuple[PositionReview, ...]] = []

    async def review(
        self, positions: Sequence[PositionReview], context: Mapping[str, object]
    ) -> Sequence[ReviewVerdict]:
        self.seen.append(tuple(positions))
        return [
            ReviewVerdict(
                ticker=p.ticker,
                action=self.actions[p.ticker],
                reason="scripted",
                decided_by="claude",
            )
            for p in positions
            if p.ticker in self.actions
        ]


class FailingReviewer:
    def __init__(self, error: Callable[[], BaseException] | None = None) -> None:
        self.calls = 0
        self._error = error or (lambda: RuntimeError("model unavailable"))

    async def review(
        self, positions: Sequence[PositionReview], context: Mapping[str, object]
    ) -> Sequence[ReviewVerdict]:
        self.calls += 1
        raise self._error()


class HangingReviewer:
    """Never answers (a stuck model call); the tracker's timeout must end it."""

    def __init__(self) -> None:
        self.cancelled = False

    async def review(
        self, positions: Sequence[PositionReview], context: Mapping[str, object]
    ) -> Sequence[ReviewVerdict]:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        raise AssertionError("unreachable")
