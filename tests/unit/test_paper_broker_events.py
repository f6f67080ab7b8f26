"""PaperBroker events: OrderFilled / PositionOpened after the change is saved; a failed save undoes
the change, publishes nothing and halts trading."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from broker.ids import client_order_id
from broker.paper import PaperBroker
from broker.paper_store import parse_document
from broker.port import Action
from contract.broker_harness import make_intent
from core.bus import EventBus
from core.clock import VirtualClock
from core.errors import HaltTradingError
from core.events import Event, MarketTick, OrderFilled, PositionOpened, Topic

EPOCH_MS = 1_740_787_200_000
BTC = "BTC/USDT"


class Recorder:
    """Collects fills and opened positions, and what the state file held when each arrived."""

    def __init__(self, bus: EventBus, path: Path | None = None) -> None:
        self.events: list[Event] = []
        self.saved_statuses: list[list[str]] = []
        self._path = path
        bus.subscribe(Topic.ORDER_FILLED, self.on_event)
        bus.subscribe(Topic.POSITION_OPENED, self.on_event)

    def on_event(self, event: Event) -> None:
        self.events.append(event)
        if self._path is not None:
            saved = parse_document(self._path.read_bytes())
            self.saved_statuses.append([o.status for o in saved.orders])


async def test_a_buy_fill_publishes_order_filled_then_position_opened() -> None:
    clock, bus = VirtualClock(EPOCH_MS), EventBus()
    seen = Recorder(bus)
    broker = PaperBroker(clock, bus=bus)
    weights = {"rsi": 0.4, "derivatives": -0.1}
    (placed,) = await broker.execute_decisions(
        [
            make_intent(
                BTC,
                Action.BUY,
                notional_usd=1000.0,
                reference_price=100.0,
                signal_weights=weights,
            )
        ]
    )
    assert seen.events == []  # placing is not filling
    await clock.advance(1)
    broker.on_market_price(BTC, 99.0, at_ms=clock.now_ms())
    assert seen.events == [
        OrderFilled(
            at_ms=clock.now_ms(),
            client_order_id=placed.client_order_id,
            ticker=BTC,
            side="buy",
            quantity=10.0,
            price=100.0,
            fee=0.2,
        ),
        PositionOpened(
            at_ms=clock.now_ms(), ticker=BTC, quantity=10.0, entry_price=100.0, signals=weights
        ),
    ]


async def test_a_top_up_and_a_sell_publish_fills_only() -> None:
    clock, bus = VirtualClock(EPOCH_MS), EventBus()
    seen = Recorder(bus)
    broker = PaperBroker(clock, bus=bus)
    for limit in (100.0, 90.0):
        broker.on_market_price(BTC, limit, at_ms=clock.now_ms())  # a limit near the market
        await broker.execute_decisions(
            [make_intent(BTC, Action.BUY, notional_usd=900.0, reference_price=limit)]
        )
        await clock.advance(1)
        broker.on_market_price(BTC, limit - 1, at_ms=clock.now_ms())
    (sold,) = await broker.execute_decisions(
        [make_intent(BTC, Action.SELL, notional_usd=1691.0, reference_price=89.0)]
    )
    kinds = [type(e).__name__ for e in seen.events]
    assert kinds == ["OrderFilled", "PositionOpened", "OrderFilled", "OrderFilled"]
    last = seen.events[-1]
    assert isinstance(last, OrderFilled)
    assert (last.side, last.client_order_id, last.quantity) == ("sell", sold.client_order_id, 19.0)
    assert last.fee == pytest.approx(sold.fee_usd)


async def test_events_are_published_only_after_the_fill_is_saved(tmp_path: Path) -> None:
    path = tmp_path / "paper_broker.json"
    clock, bus = VirtualClock(EPOCH_MS), EventBus()
    seen = Recorder(bus, path)
    broker = PaperBroker(clock, bus=bus, state_path=path)
    await broker.execute_decisions(
        [make_intent(BTC, Action.BUY, notional_usd=1000.0, reference_price=100.0)]
    )
    await clock.advance(1)
    broker.on_market_price(BTC, 99.0, at_ms=clock.now_ms())
    assert seen.saved_statuses == [["filled"], ["filled"]]


def _break(path: Path) -> None:
    """Make the next save fail: a directory where the file must be replaced."""
    path.unlink()
    path.mkdir()


def _repair(path: Path, content: bytes) -> None:
    shutil.rmtree(path)
    path.write_bytes(content)


async def test_a_failed_save_undoes_the_order_and_halts_trading(tmp_path: Path) -> None:
    path = tmp_path / "paper_broker.json"
    clock, bus = VirtualClock(EPOCH_MS), EventBus()
    broker = PaperBroker(clock, bus=bus, state_path=path)
    good = path.read_bytes()
    intent = make_intent(BTC, Action.BUY, notional_usd=1000.0, reference_price=100.0)
    _break(path)
    with pytest.raises(HaltTradingError, match="could not save"):
        await broker.execute_decisions([intent])
    assert broker.open_orders() == [] and await broker.get_cash() == 10_000.0
    intent_id = client_order_id(intent.decision_id, BTC, "BUY")
    assert await broker.lookup(intent_id) is None

    _repair(path, good)
    (placed,) = await broker.execute_decisions([intent])  # the undone order can be placed anew
    assert placed.status == "open" and placed.client_order_id == intent_id
    assert parse_document(path.read_bytes()).ledger == broker.ledger


async def test_a_fill_that_cannot_be_saved_does_not_happen_yet(tmp_path: Path) -> None:
    path = tmp_path / "paper_broker.json"
    clock, bus = VirtualClock(EPOCH_MS), EventBus()
    seen = Recorder(bus)
    broker = PaperBroker(clock, bus=bus, state_path=path)
    await broker.execute_decisions(
        [make_intent(BTC, Action.BUY, notional_usd=1000.0, reference_price=100.0)]
    )
    good = path.read_bytes()
    _break(path)
    await clock.advance(1)
    with pytest.raises(HaltTradingError):
        broker.on_market_price(BTC, 99.0, at_ms=clock.now_ms())
    assert seen.events == [] and broker.ledger.positions == {}
    assert len(broker.open_orders()) == 1
    mark = broker.mark(BTC)
    assert mark is not None and mark.price == 99.0  # the price itself was seen

    _repair(path, good)
    await clock.advance(1)
    broker.on_market_price(BTC, 98.0, at_ms=clock.now_ms())  # the next trade through fills it
    assert [type(e).__name__ for e in seen.events] == ["OrderFilled", "PositionOpened"]
    assert parse_document(path.read_bytes()).ledger.positions.keys() == {BTC}


async def test_the_tick_sink_never_raises_and_logs_a_failure_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "paper_broker.json"
    clock, bus = VirtualClock(EPOCH_MS), EventBus()
    broker = PaperBroker(clock, bus=bus, state_path=path)
    broker.on_market_tick(_tick(100.0, 100.0, clock.now_ms()))
    await broker.execute_decisions(
        [make_intent(BTC, Action.BUY, notional_usd=1000.0, reference_price=100.0)]
    )
    good = path.read_bytes()
    _break(path)
    for n in range(1, 4):
        await clock.advance(1)
        broker.on_market_tick(_tick(99.0 - n, 99.0 - n, clock.now_ms()))  # a new low each time
    assert broker.tick_failures == 3 and broker.ledger.positions == {}
    failures = [r for r in caplog.records if "market tick for BTC/USDT failed" in r.getMessage()]
    assert len(failures) == 1 and failures[0].exc_info is not None

    _repair(path, good)
    await clock.advance(1)
    broker.on_market_tick(_tick(95.0, 95.0, clock.now_ms()))
    assert BTC in broker.ledger.positions
    assert any("work again after 3 failures" in r.getMessage() for r in caplog.records)


def _tick(low: float, close: float, at_ms: int) -> MarketTick:
    return MarketTick(
        ticker=BTC,
        timeframe="5m",
        open_time_ms=EPOCH_MS,
        close_time_ms=EPOCH_MS + 299_999,
        open=100.0,
        high=100.0,
        low=low,
        close=close,
        volume=1.0,
        closed=False,
        event_time_ms=at_ms,
    )
