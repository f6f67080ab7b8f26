"""The paper broker's shortcut for ticks that meet no open order (``on_market_tick``) against the
general path it skips (the traded range, then ``on_market_price``): the same marks, orders,
ledger and failures after any mix of ticks (prices the fill rules refuse included), orders and
time; ``get_open_orders``, which skips its scan while no order is open, against the scan; and
``TradedRangeTracker.note`` against ``observe``."""

from __future__ import annotations

import asyncio
import math
from decimal import Decimal
from typing import NamedTuple

from hypothesis import given, settings
from hypothesis import strategies as st
from market_test_support import make_tick
from property_budget import examples

from broker.book import PaperBook
from broker.fills import PaperTerms
from broker.ledger import Ledger
from broker.orders import Mark
from broker.paper import PaperBroker
from broker.port import Action
from broker.traded_range import TradedRangeTracker
from contract.broker_harness import make_intent
from core.clock import VirtualClock
from core.events import MarketTick, Timeframe
from market.timeframes import TIMEFRAME_MS

EPOCH_MS = 1_740_787_200_000
TICKERS = ("BTC/USDT", "ETH/USDT")
TIMEFRAMES: st.SearchStrategy[Timeframe] = st.sampled_from(["15m", "1h"])
FINE = st.sampled_from([97.0, 98.0, 99.0, 99.5, 100.0, 101.0, 103.0])
#: fine prices, and the ones the fill rules refuse (the general path logs and counts those)
PRICES = st.one_of(FINE, st.sampled_from([math.nan, math.inf, 0.0, -1.0]))
#: open, high, low, close: mostly a candle the fill rules take, sometimes anything
OHLC = st.one_of(
    st.tuples(FINE, FINE, FINE).map(lambda p: (p[0], max(p), min(p), sorted(p)[1])),
    st.tuples(FINE, FINE, FINE).map(lambda p: (p[0], max(p), min(p), sorted(p)[1])),
    st.tuples(PRICES, PRICES, PRICES, PRICES),
)


class Push(NamedTuple):
    ticker: str
    timeframe: Timeframe
    candle: int  # which candle: older ones come too
    ohlc: tuple[float, float, float, float]
    skew_ms: int  # event time vs the clock: late, now, ahead


class Buy(NamedTuple):
    ticker: str
    reference_price: float


class Sell(NamedTuple):
    ticker: str


class Advance(NamedTuple):
    secs: int


Step = Push | Buy | Sell | Advance


def quiet_tick(
    ticker: str, timeframe: Timeframe, index: int, ohlc: tuple[float, ...], at_ms: int
) -> MarketTick:
    o, h, low, c = ohlc
    open_ms = EPOCH_MS + index * TIMEFRAME_MS[timeframe]
    return make_tick(
        ticker=ticker,
        timeframe=timeframe,
        open_ms=open_ms,
        event_ms=at_ms,
        o=o,
        h=h,
        low=low,
        c=c,
        v=1.0,
    )


PUSHES = st.builds(
    Push,
    st.sampled_from(TICKERS),
    TIMEFRAMES,
    st.integers(min_value=0, max_value=4),
    OHLC,
    st.integers(min_value=-1, max_value=1),
)
STEPS = st.lists(
    st.one_of(
        PUSHES,
        PUSHES,
        st.builds(Buy, st.sampled_from(TICKERS), st.sampled_from([99.0, 100.0])),
        st.builds(Sell, st.sampled_from(TICKERS)),
        st.builds(Advance, st.sampled_from([1, 60, 400, 1000])),
    ),
    max_size=60,
)


class Reference:
    """The general path on every tick: what ``on_market_tick`` did before its shortcut."""

    def __init__(self, broker: PaperBroker) -> None:
        self.broker = broker
        self.ranges = TradedRangeTracker()
        self.failures = 0

    def on_market_tick(self, tick: MarketTick) -> None:
        traded = self.ranges.observe(tick)
        if traded is None:
            return
        try:
            self.broker.on_market_price(
                tick.ticker, traded.price, low=traded.low, high=traded.high, at_ms=traded.at_ms
            )
        except ValueError:
            self.failures += 1


def state_of(broker: PaperBroker, failures: int) -> tuple[object, ...]:
    marks = tuple(broker.mark(t) for t in TICKERS)
    return broker.ledger, broker.open_orders(), marks, broker.portfolio_value_usd(), failures


async def drive(steps: list[Step]) -> None:
    clock = VirtualClock(EPOCH_MS)
    quick, general = PaperBroker(clock), PaperBroker(clock)
    reference = Reference(general)
    for n, step in enumerate(steps):
        if isinstance(step, Push):
            at_ms = max(EPOCH_MS, clock.now_ms() + step.skew_ms)
            tick = quiet_tick(step.ticker, step.timeframe, step.candle, step.ohlc, at_ms)
            quick.on_market_tick(tick)
            reference.on_market_tick(tick)
        elif isinstance(step, Advance):
            await clock.advance(step.secs)
        else:
            action, price = (
                (Action.BUY, step.reference_price)
                if isinstance(step, Buy)
                else (Action.SELL, 100.0)
            )
            for broker in (quick, general):  # one decision id: the same client order ids
                intent = make_intent(
                    step.ticker,
                    action,
                    notional_usd=500.0,
                    reference_price=price,
                    decision_id=f"d{n}",
                )
                await broker.execute_decisions([intent])
        assert state_of(quick, quick.tick_failures) == state_of(general, reference.failures)
        # ``get_open_orders`` answers without its scan while the book holds no open order
        answered = await quick.get_open_orders()
        general.expire_due_orders()  # as the call did to ``quick``: both stay in step
        placed = sorted(
            (o for o in general._book.orders() if o.is_open), key=lambda o: o.placed_at_ms
        )
        assert [o.client_order_id for o in answered] == [o.client_order_id for o in placed]


@settings(max_examples=examples(400), deadline=None)
@given(steps=STEPS)
def test_the_shortcut_leaves_the_broker_as_the_general_path_does(steps: list[Step]) -> None:
    asyncio.run(drive(steps))


@settings(max_examples=examples(300), deadline=None)
@given(
    pushes=st.lists(
        st.tuples(
            TIMEFRAMES,
            st.integers(min_value=0, max_value=3),
            OHLC,
            st.booleans(),  # noted (the range unused) or observed
        ),
        max_size=40,
    )
)
def test_note_remembers_what_observe_remembers(
    pushes: list[tuple[Timeframe, int, tuple[float, float, float, float], bool]],
) -> None:
    noting, observing = TradedRangeTracker(), TradedRangeTracker()
    for i, (timeframe, index, ohlc, noted) in enumerate(pushes):
        tick = quiet_tick(TICKERS[0], timeframe, index, ohlc, EPOCH_MS + i)
        expected = observing.observe(tick)
        if noted:
            assert noting.note(tick) is (expected is not None)
        else:
            assert repr(noting.observe(tick)) == repr(expected)  # repr: NaN prices compare equal


@settings(max_examples=examples(300), deadline=None)
@given(
    updates=st.lists(
        st.tuples(st.sampled_from(TICKERS), FINE, st.integers(min_value=0, max_value=3)),
        max_size=30,
    )
)
def test_marking_keeps_the_newest_price_by_market_time(
    updates: list[tuple[str, float, int]],
) -> None:
    book = PaperBook(PaperTerms(), Ledger.fresh(Decimal(1000)))
    expected: dict[str, Mark] = {}
    for ticker, price, at_ms in updates:
        book.mark_market(ticker, price, at_ms)
        last = expected.get(ticker)
        if last is None or at_ms >= last.at_ms:  # the rule before equal marks were kept
            expected[ticker] = Mark(price, at_ms)
        got = book.mark(ticker)
        assert got == expected[ticker] and type(got) is Mark
        assert repr(got) == repr(expected[ticker]) and type(got.at_ms) is int
