"""MultiTFAggregator: exactly-once closes, gaps reported, seeding, windows, observers."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from market_test_support import candle_series, close_tick, make_tick
from property_budget import examples

from core.bus import EventBus
from core.events import Candle, CandleClosed, Event, MarketGap, MarketTick, Topic
from market.aggregator import MultiTFAggregator

STEP = 900_000
T0 = 1_740_787_200_000


class Recorder:
    def __init__(self, bus: EventBus) -> None:
        self.closed: list[CandleClosed] = []
        self.gaps: list[MarketGap] = []
        bus.subscribe(Topic.CANDLE_CLOSED, self._on_closed)
        bus.subscribe(Topic.MARKET_GAP, self._on_gap)

    def _on_closed(self, event: Event) -> None:
        assert isinstance(event, CandleClosed)
        self.closed.append(event)

    def _on_gap(self, event: Event) -> None:
        assert isinstance(event, MarketGap)
        self.gaps.append(event)


class SpyObserver:
    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def on_tick(self, tick: MarketTick) -> None:
        self.calls.append(("tick", tick.open_time_ms))

    def on_close(self, ticker: str, timeframe: str, candle: Candle) -> None:
        self.calls.append(("close", candle.open_time_ms))

    def on_correct(self, ticker: str, timeframe: str, candle: Candle) -> None:
        self.calls.append(("correct", candle.open_time_ms))


@pytest.fixture
def bus() -> EventBus:
    return EventBus()


def _aggregator(bus: EventBus, **kwargs: Any) -> tuple[MultiTFAggregator, Recorder]:
    aggregator = MultiTFAggregator(bus, **kwargs)
    bus.subscribe(Topic.MARKET_TICK, aggregator.on_tick, name="aggregator")
    return aggregator, Recorder(bus)


def test_forming_ticks_then_one_close(bus: EventBus) -> None:
    aggregator, rec = _aggregator(bus)
    bus.publish(make_tick(open_ms=T0, event_ms=T0 + 1000, c=101.0))
    bus.publish(make_tick(open_ms=T0, event_ms=T0 + 2000, c=102.0, v=11.0))
    current = aggregator.current("BTC/USDT", "15m")
    assert current is not None and current.close == 102.0 and current.volume == 11.0
    assert aggregator.last_price("BTC/USDT") == 102.0

    bus.publish(make_tick(open_ms=T0, c=103.0, v=12.0, closed=True))
    assert [e.candle for e in rec.closed] == [
        Candle(open_time_ms=T0, open=100.0, high=110.0, low=90.0, close=103.0, volume=12.0)
    ]
    assert aggregator.current("BTC/USDT", "15m") is None
    assert aggregator.closed("BTC/USDT", "15m") == (rec.closed[0].candle,)
    assert aggregator.last_price("BTC/USDT") == 103.0


def test_duplicate_and_stale_closes_are_ignored_and_counted(bus: EventBus) -> None:
    aggregator, rec = _aggregator(bus)
    for i in (0, 1):
        bus.publish(make_tick(open_ms=T0 + i * STEP, closed=True))
    bus.publish(make_tick(open_ms=T0 + STEP, closed=True))  # duplicate (same values)
    bus.publish(make_tick(open_ms=T0, closed=True, c=99.0))  # older than the last emitted
    assert [e.candle.open_time_ms for e in rec.closed] == [T0, T0 + STEP]
    assert rec.closed[0].candle.close == 105.0  # a stale close corrects nothing
    stats = aggregator.stats
    assert (stats.duplicate_closes, stats.stale_closes, stats.closes_emitted) == (1, 1, 2)
    assert stats.corrected_closes == 0


def test_a_different_close_of_the_newest_candle_corrects_it(bus: EventBus) -> None:
    spy = SpyObserver()
    aggregator = MultiTFAggregator(bus, observers=[spy])
    bus.subscribe(Topic.MARKET_TICK, aggregator.on_tick, name="aggregator")
    rec = Recorder(bus)
    bus.publish(make_tick(open_ms=T0, closed=True, v=0.5))  # provisional: 5 % of the volume
    bus.publish(make_tick(open_ms=T0, closed=True, c=99.0, v=10.0))  # the exchange corrects it
    assert [e.candle.close for e in rec.closed] == [105.0, 99.0]  # CandleClosed again, corrected
    assert aggregator.closed("BTC/USDT", "15m") == (rec.closed[1].candle,)
    assert aggregator.closed_arrays("BTC/USDT", "15m").volume.tolist() == [10.0]
    assert aggregator.stats.corrected_closes == 1 and aggregator.stats.closes_emitted == 1
    assert spy.calls == [("close", T0), ("tick", T0), ("correct", T0), ("tick", T0)]


def test_late_and_stale_forming_updates_are_ignored(bus: EventBus) -> None:
    aggregator, _ = _aggregator(bus)
    bus.publish(make_tick(open_ms=T0, closed=True))
    bus.publish(make_tick(open_ms=T0, event_ms=T0 + 5_000, c=50.0, low=40.0))  # candle closed
    assert aggregator.current("BTC/USDT", "15m") is None
    bus.publish(make_tick(open_ms=T0 + STEP, event_ms=T0 + STEP + 2_000, c=101.0))
    bus.publish(make_tick(open_ms=T0 + STEP, event_ms=T0 + STEP + 1_000, c=100.5))  # older
    current = aggregator.current("BTC/USDT", "15m")
    assert current is not None and current.close == 101.0
    assert (aggregator.stats.late_updates, aggregator.stats.stale_updates) == (1, 1)


def test_a_skipping_close_reports_the_gap_and_never_fills_it(bus: EventBus) -> None:
    aggregator, rec = _aggregator(bus)
    bus.publish(make_tick(open_ms=T0, closed=True))
    bus.publish(make_tick(open_ms=T0 + 4 * STEP, closed=True))
    assert rec.gaps == [
        MarketGap(
            ticker="BTC/USDT",
            timeframe="15m",
            missing_from_ms=T0 + STEP,
            missing_to_ms=T0 + 4 * STEP,
            missing_candles=3,
        )
    ]
    assert [c.open_time_ms for c in aggregator.closed("BTC/USDT", "15m")] == [T0, T0 + 4 * STEP]
    assert (aggregator.stats.gaps_reported, aggregator.stats.missing_candles) == (1, 3)


def test_gap_is_published_before_the_close_that_revealed_it(bus: EventBus) -> None:
    _aggregator(bus)
    order: list[str] = []
    bus.subscribe(Topic.MARKET_GAP, lambda e: order.append("gap"))
    bus.subscribe(Topic.CANDLE_CLOSED, lambda e: order.append("closed"))
    bus.publish(make_tick(open_ms=T0, closed=True))
    bus.publish(make_tick(open_ms=T0 + 2 * STEP, closed=True))
    assert order == ["closed", "gap", "closed"]


def test_series_are_independent_per_ticker_and_timeframe(bus: EventBus) -> None:
    aggregator, rec = _aggregator(bus)
    bus.publish(make_tick(ticker="BTC/USDT", timeframe="15m", open_ms=T0, closed=True))
    bus.publish(make_tick(ticker="ETH/USDT", timeframe="15m", open_ms=T0, closed=True, c=106.0))
    bus.publish(make_tick(ticker="BTC/USDT", timeframe="1h", open_ms=T0, closed=True))
    assert {(e.ticker, e.timeframe) for e in rec.closed} == {
        ("BTC/USDT", "15m"),
        ("ETH/USDT", "15m"),
        ("BTC/USDT", "1h"),
    }
    assert aggregator.last_price("ETH/USDT") == 106.0
    assert aggregator.last_price("SOL/USDT") is None
    assert aggregator.closed("SOL/USDT", "15m") == ()


def test_seed_publishes_nothing_and_anchors_gap_detection(bus: EventBus) -> None:
    aggregator, rec = _aggregator(bus)
    history = candle_series([100.0, 101.0, 102.0], start_ms=T0)
    assert aggregator.seed("BTC/USDT", "15m", reversed(history)) == 3
    assert aggregator.seed("BTC/USDT", "15m", history) == 0  # already known
    assert rec.closed == [] and rec.gaps == []
    assert aggregator.closed("BTC/USDT", "15m") == tuple(history)
    assert aggregator.last_price("BTC/USDT") == 102.0
    bus.publish(make_tick(open_ms=T0 + 2 * STEP, closed=True))  # the seeded last one again
    bus.publish(make_tick(open_ms=T0 + 5 * STEP, closed=True))
    assert [e.candle.open_time_ms for e in rec.closed] == [T0 + 5 * STEP]
    assert rec.gaps[0].missing_from_ms == T0 + 3 * STEP and rec.gaps[0].missing_candles == 2


def test_seed_rejects_misaligned_candles(bus: EventBus) -> None:
    aggregator, _ = _aggregator(bus)
    with pytest.raises(ValueError, match="not aligned"):
        aggregator.seed("BTC/USDT", "15m", candle_series([1.0], start_ms=T0 + 1))


def test_window_keeps_the_last_n_and_arrays_match(bus: EventBus) -> None:
    aggregator, _ = _aggregator(bus, window=3)
    candles = candle_series([1.0, 2.0, 3.0, 4.0, 5.0], start_ms=T0, volumes=[1, 2, 3, 4, 5])
    for candle in candles:
        bus.publish(close_tick(candle))
    assert aggregator.closed("BTC/USDT", "15m") == tuple(candles[2:])
    arrays = aggregator.closed_arrays("BTC/USDT", "15m")
    assert arrays.open_time_ms.tolist() == [c.open_time_ms for c in candles[2:]]
    assert arrays.close.tolist() == [3.0, 4.0, 5.0]
    assert arrays.volume.tolist() == [3.0, 4.0, 5.0]
    assert arrays.open_time_ms.dtype == np.int64 and arrays.close.dtype == np.float64
    assert aggregator.closed_arrays("BTC/USDT", "15m") is arrays  # cached until the next close
    with pytest.raises(ValueError, match="read-only"):
        arrays.close[0] = 0.0
    bus.publish(close_tick(candle_series([6.0], start_ms=T0 + 5 * STEP)[0]))
    assert aggregator.closed_arrays("BTC/USDT", "15m").close.tolist() == [4.0, 5.0, 6.0]
    assert len(aggregator.closed_arrays("ETH/USDT", "15m").close) == 0


def test_observers_see_accepted_ticks_and_closes_before_the_event(bus: EventBus) -> None:
    spy = SpyObserver()
    seen_at_close: list[list[tuple[str, int]]] = []
    aggregator = MultiTFAggregator(bus, observers=[spy])
    bus.subscribe(Topic.MARKET_TICK, aggregator.on_tick, name="aggregator")
    bus.subscribe(Topic.CANDLE_CLOSED, lambda e: seen_at_close.append(list(spy.calls)))
    bus.publish(make_tick(open_ms=T0))
    bus.publish(make_tick(open_ms=T0, closed=True))
    bus.publish(make_tick(open_ms=T0, closed=True))  # duplicate: observers don't see it
    assert spy.calls == [("tick", T0), ("close", T0), ("tick", T0)]
    assert seen_at_close == [[("tick", T0), ("close", T0), ("tick", T0)]]


def test_backfilled_old_close_does_not_roll_back_the_last_price(bus: EventBus) -> None:
    aggregator, _ = _aggregator(bus)
    bus.publish(make_tick(open_ms=T0 + 2 * STEP, event_ms=T0 + 2 * STEP + 10, c=120.0, h=125.0))
    bus.publish(make_tick(open_ms=T0 + STEP, closed=True, c=95.0))  # backfilled, older
    assert aggregator.last_price("BTC/USDT") == 120.0
    assert aggregator.last_closed("BTC/USDT", "15m") is not None


def test_non_tick_events_on_the_topic_are_refused(bus: EventBus) -> None:
    aggregator = MultiTFAggregator(bus)
    with pytest.raises(TypeError):
        aggregator.on_tick(
            MarketGap(
                ticker="x", timeframe="15m", missing_from_ms=0, missing_to_ms=1, missing_candles=1
            )
        )


@settings(max_examples=examples(150), deadline=None)
@given(
    arrivals=st.lists(st.integers(0, 30), min_size=1, max_size=80),
)
def test_any_arrival_order_emits_each_close_once_in_order(arrivals: list[int]) -> None:
    """Closes arriving duplicated, late or skipping: emitted opens strictly increase, nothing twice,
    and every skipped span is reported exactly as the missing candles between emitted closes."""
    bus = EventBus()
    aggregator, rec = _aggregator(bus)
    for index in arrivals:
        bus.publish(make_tick(open_ms=T0 + index * STEP, closed=True))
    opens = [e.candle.open_time_ms for e in rec.closed]
    assert opens == sorted(set(opens))
    expected: list[int] = []
    for index in arrivals:  # the reference: keep a close only when newer than the last kept
        if not expected or index > expected[-1]:
            expected.append(index)
    assert opens == [T0 + i * STEP for i in expected]
    missing = sum(b - a - 1 for a, b in itertools.pairwise(expected))
    assert sum(g.missing_candles for g in rec.gaps) == missing
    for gap in rec.gaps:
        assert gap.missing_to_ms - gap.missing_from_ms == gap.missing_candles * STEP
    stats = aggregator.stats
    assert stats.closes_emitted + stats.duplicate_closes + stats.stale_closes == len(arrivals)


def _columns(arrays: Any) -> list[list[float]]:
    return [column.tolist() for column in arrays]


@settings(max_examples=examples(60), deadline=None)
@given(
    steps=st.lists(st.sampled_from(["close", "read", "correct", "seed"]), min_size=1, max_size=40)
)
def test_arrays_extended_close_by_close_equal_a_rebuild_of_the_window(steps: list[str]) -> None:
    """The arrays a read extends by the closes since the last read are the window's own columns,
    whatever mix of closes, reads, corrections and seeds came before."""
    bus = EventBus()
    aggregator = MultiTFAggregator(bus, window=5)
    bus.subscribe(Topic.MARKET_TICK, aggregator.on_tick, name="aggregator")
    opened = itertools.count()
    last: Candle | None = None
    handed_out: list[tuple[Any, list[list[float]]]] = []
    for step in steps:
        if step == "close":
            n = next(opened)
            last = candle_series([100.0 + n], start_ms=T0 + n * STEP, volumes=[1.0 + n])[0]
            bus.publish(close_tick(last))
        elif step == "correct" and last is not None:
            bus.publish(close_tick(last.model_copy(update={"close": last.close + 0.5})))
        elif step == "seed":
            first = next(opened)
            more = [next(opened) for _ in range(2)]
            seeded = candle_series([50.0 + i for i in [first, *more]], start_ms=T0 + first * STEP)
            aggregator.seed("BTC/USDT", "15m", seeded)
            last = seeded[-1]
        else:
            arrays = _assert_arrays_are_the_window(aggregator)
            handed_out.append((arrays, _columns(arrays)))
    _assert_arrays_are_the_window(aggregator)
    # arrays handed out earlier are snapshots: later closes never write over them
    assert all(_columns(arrays) == kept for arrays, kept in handed_out)


@settings(max_examples=examples(30), deadline=None)
@given(reads_every=st.integers(min_value=1, max_value=7), closes=st.integers(1, 60))
def test_arrays_read_every_few_closes_match_a_rebuild_with_the_same_types(
    reads_every: int, closes: int
) -> None:
    """Reads spaced over many windows (the columns' room fills up and moves) keep the types."""
    bus = EventBus()
    aggregator = MultiTFAggregator(bus, window=4)
    bus.subscribe(Topic.MARKET_TICK, aggregator.on_tick, name="aggregator")
    for n in range(closes):
        candle = candle_series([100.0 + n], start_ms=T0 + n * STEP, volumes=[2.0 + n])[0]
        bus.publish(close_tick(candle))
        if n % reads_every == 0:
            arrays = _assert_arrays_are_the_window(aggregator)
            assert [c.dtype for c in arrays] == [np.int64] + [np.float64] * 5


def _assert_arrays_are_the_window(aggregator: MultiTFAggregator) -> Any:
    arrays = aggregator.closed_arrays("BTC/USDT", "15m")
    rebuilt = MultiTFAggregator(EventBus(), window=5)
    rebuilt.seed("BTC/USDT", "15m", aggregator.closed("BTC/USDT", "15m"))
    assert _columns(arrays) == _columns(rebuilt.closed_arrays("BTC/USDT", "15m"))
    assert all(not column.flags.writeable for column in arrays)
    return arrays
