"""Kline pushes -> what traded between them, and the paper broker fed from market ticks: a candle's
low from before an order was placed never fills it."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from market_test_support import make_tick
from property_budget import examples

from broker.paper import PaperBroker
from broker.port import Action
from broker.traded_range import TradedRangeTracker
from contract.broker_harness import make_intent
from core.bus import EventBus
from core.clock import VirtualClock
from core.events import MarketTick, Topic

EPOCH_MS = 1_740_787_200_000
CANDLE_MS = 300_000
BTC = "BTC/USDT"


def tick(
    open_index: int, o: float, h: float, low: float, c: float, at_ms: int, *, ticker: str = BTC
) -> MarketTick:
    return make_tick(
        ticker=ticker,
        timeframe="5m",
        open_ms=EPOCH_MS + open_index * CANDLE_MS,
        event_ms=at_ms,
        o=o,
        h=h,
        low=low,
        c=c,
        v=1.0,
    )


def test_the_first_push_of_a_stream_tells_only_its_close() -> None:
    tracker = TradedRangeTracker()
    seen = tracker.observe(tick(0, 100, 105, 90, 101, EPOCH_MS + 10))
    assert seen is not None and (seen.price, seen.low, seen.high) == (101, None, None)


def test_a_later_push_of_the_same_candle_tells_only_new_extremes() -> None:
    tracker = TradedRangeTracker()
    tracker.observe(tick(0, 100, 105, 90, 101, EPOCH_MS + 10))
    quiet = tracker.observe(tick(0, 100, 105, 90, 97, EPOCH_MS + 20))
    assert quiet is not None and (quiet.price, quiet.low, quiet.high) == (97, None, None)
    lower = tracker.observe(tick(0, 100, 105, 89, 95, EPOCH_MS + 30))
    assert lower is not None and (lower.low, lower.high) == (89, None)
    higher = tracker.observe(tick(0, 100, 107, 89, 106, EPOCH_MS + 40))
    assert higher is not None and (higher.low, higher.high, higher.at_ms) == (
        None,
        107,
        EPOCH_MS + 40,
    )


def test_a_new_candle_tells_its_whole_range_and_an_old_one_nothing() -> None:
    tracker = TradedRangeTracker()
    tracker.observe(tick(0, 100, 105, 90, 101, EPOCH_MS + 10))
    fresh = tracker.observe(tick(1, 101, 103, 99, 102, EPOCH_MS + CANDLE_MS + 10))
    assert fresh is not None and (fresh.low, fresh.high) == (99, 103)
    assert tracker.observe(tick(0, 100, 105, 80, 101, EPOCH_MS + CANDLE_MS + 20)) is None


def test_streams_are_tracked_apart() -> None:
    tracker = TradedRangeTracker()
    tracker.observe(tick(0, 100, 105, 90, 101, EPOCH_MS + 10))
    other = tracker.observe(tick(0, 10, 11, 9, 10, EPOCH_MS + 10, ticker="ETH/USDT"))
    assert other is not None and other.low is None


@st.composite
def pushed_trades(draw: st.DrawFn) -> tuple[list[float], int, list[bool]]:
    trades = draw(
        st.lists(st.integers(min_value=1, max_value=60).map(float), min_size=1, max_size=80)
    )
    candle_size = draw(st.integers(min_value=1, max_value=12))
    pushes = draw(st.lists(st.booleans(), min_size=len(trades), max_size=len(trades)))
    return trades, candle_size, pushes


@settings(max_examples=examples(300), deadline=None)
@given(case=pushed_trades())
def test_a_reported_range_only_holds_prices_that_traded_since_the_last_push(
    case: tuple[list[float], int, list[bool]],
) -> None:
    trades, candle_size, pushes = case
    tracker = TradedRangeTracker()
    since_push: list[float] = []
    candle: list[float] = []
    for i, price in enumerate(trades):
        if i % candle_size == 0:
            candle = []
        candle.append(price)
        since_push.append(price)
        if not pushes[i]:
            continue
        seen = tracker.observe(
            tick(i // candle_size, candle[0], max(candle), min(candle), price, EPOCH_MS + i)
        )
        assert seen is not None and seen.price == price
        for extreme in (seen.low, seen.high):
            if extreme is not None:  # a price that really traded since the previous push
                assert extreme in since_push
        if seen.low is not None:
            assert seen.low >= min(since_push)
        if seen.high is not None:
            assert seen.high <= max(since_push)
        since_push = []


async def test_market_ticks_fill_only_on_trading_after_the_order() -> None:
    clock, bus = VirtualClock(EPOCH_MS), EventBus()
    broker = PaperBroker(clock, bus=bus)
    bus.subscribe(Topic.MARKET_TICK, broker.on_market_tick)
    # the candle already dipped to 95 before the order exists
    bus.publish(tick(0, 100, 101, 95, 100, clock.now_ms()))
    await clock.advance(1)
    (placed,) = await broker.execute_decisions(
        [make_intent(BTC, Action.BUY, notional_usd=1000.0, reference_price=99.0)]
    )
    await clock.advance(1)
    bus.publish(tick(0, 100, 101, 95, 99.5, clock.now_ms()))  # low 95 is old news
    assert len(broker.open_orders()) == 1
    await clock.advance(1)
    bus.publish(tick(0, 100, 101, 94, 99.5, clock.now_ms()))  # a new low: it traded through
    found = await broker.lookup(placed.client_order_id)
    assert found is not None and found.status == "filled" and found.average_price == 99.0
    mark = broker.mark(BTC)
    assert mark is not None and mark.price == 99.5


async def test_the_next_candle_counts_whole_for_an_order_placed_before_it() -> None:
    clock = VirtualClock(EPOCH_MS)
    broker = PaperBroker(clock)
    broker.on_market_tick(tick(0, 100, 101, 99.5, 100, clock.now_ms()))
    await broker.execute_decisions(
        [make_intent(BTC, Action.BUY, notional_usd=1000.0, reference_price=99.0)]
    )
    await clock.advance(300)
    broker.on_market_tick(tick(1, 100, 100.5, 98.0, 100.2, clock.now_ms()))
    assert broker.open_orders() == [] and BTC in broker.ledger.positions
