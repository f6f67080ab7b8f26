"""One bad frame never stops the feed: time from the future, absurd prices, early closes, and a
hostile mix of everything through parser -> guard -> listener ordering -> aggregator -> snapshot.

Frames go through ``MarketListener.frames.on_frame`` (what the socket loop calls per frame), so nothing
here needs a socket; the clock is virtual and set to each good frame's event time.
"""

from __future__ import annotations

import random
from typing import Any

import orjson
from fakes.brokers import IdleBroker
from hypothesis import given, settings
from hypothesis import strategies as st
from market_test_support import combined, kline_payload
from property_budget import examples

from agent.snapshot_builder import SnapshotBuilder
from core.bus import EventBus
from core.events import Candle, CandleClosed, Event, Topic
from market.aggregator import CandleArrays, MultiTFAggregator
from market.features import FeatureTracker, TickFeatures
from market.guard import RejectionCounter
from market.listener import MarketListener
from regime.snapshot import RegimeSnapshot
from sim.hostile import IN_PROCESS_KINDS, HostileKind, hostile_frame

STEP = 900_000
T0 = 1_740_787_200_000  # 2025-03-01 00:00 UTC
TICKERS = ("BTC/USDT", "ETH/USDT")


class FrameClock:
    """A Clock a test sets to each frame's instant (nothing here sleeps: no loop runs)."""

    def __init__(self, now_ms: int) -> None:
        self.ms = now_ms

    def set_ms(self, now_ms: int) -> None:
        self.ms = now_ms

    def now_ms(self) -> int:
        return self.ms

    def monotonic_secs(self) -> float:
        return self.ms / 1000.0

    async def sleep(self, secs: float) -> None:
        raise AssertionError("nothing sleeps in these tests")


class Path:
    """The daemon's tick path without sockets: listener -> bus -> aggregator + features."""

    def __init__(self, start_ms: int = T0 + 60_000) -> None:
        self.clock = FrameClock(start_ms)
        self.bus = EventBus()
        self.features = FeatureTracker()
        self.aggregator = MultiTFAggregator(self.bus, observers=[self.features])
        self.bus.subscribe(Topic.MARKET_TICK, self.aggregator.on_tick, name="aggregator")
        self.listener = MarketListener(
            self.clock,
            self.bus,
            base_url="ws://127.0.0.1:1",  # never connected: frames are fed to on_frame
            tickers=TICKERS,
            timeframes=["15m"],
            reference_price=self.aggregator.last_price,
        )
        self.closed: list[Candle] = []
        self.bus.subscribe(Topic.CANDLE_CLOSED, self._on_closed)

    def _on_closed(self, event: Event) -> None:
        assert isinstance(event, CandleClosed)
        self.closed.append(event.candle)

    def feed(self, payload: dict[str, Any]) -> None:
        self.listener.frames.on_frame(orjson.dumps(combined(payload)))

    def snapshot_builder(self) -> SnapshotBuilder:
        return builder(self.clock, self.aggregator, self.features)


async def _no_regime() -> RegimeSnapshot | None:
    return None


def builder(clock: FrameClock, market: Any, features: Any) -> SnapshotBuilder:
    return SnapshotBuilder(
        clock,
        tickers=TICKERS,
        market=market,
        features=features,
        broker=IdleBroker(),
        agent_memory=lambda: "",
        peak_prices=dict,
        regime=_no_regime,
    )


def good(open_ms: int, event_ms: int, *, c: float = 100.0, closed: bool = False, **kw: Any) -> Any:
    return kline_payload(
        open_ms=open_ms,
        event_ms=event_ms,
        o="100.0",
        h=f"{max(100.0, c) + 1:.2f}",
        low=f"{min(100.0, c) - 1:.2f}",
        c=f"{c:.2f}",
        closed=closed,
        **kw,
    )


# -- time from the future --------------------------------------------------------------------


def test_a_frame_from_the_future_neither_pins_the_stream_nor_stops_decisions() -> None:
    path = Path()
    path.feed(good(T0, T0 + 1_000, c=100.0))
    for future_e in (T0 + 10 * 86_400_000, 2**63 - 1):
        path.feed(good(T0, future_e, c=100.5))
    path.feed(good(T0 + 30 * STEP, T0 + 30 * STEP + 1, c=100.5))  # a candle far ahead
    for i in range(2, 6):  # the real frames after it are all taken
        path.clock.set_ms(T0 + i * 1_000)
        path.feed(good(T0, T0 + i * 1_000, c=100.0 + i))
    assert path.listener.stats.ticks_published == 5
    assert path.listener.stats.rejected == {"future_time": 3}
    assert path.aggregator.last_price("BTC/USDT") == 105.0  # not pinned at the future frame


async def test_the_maximum_event_time_does_not_break_the_snapshot() -> None:
    path = Path()
    path.feed(good(T0, 2**63 - 1, c=100.0))
    path.feed(good(T0, T0 + 2_000, c=101.0))
    snapshot = await path.snapshot_builder().build(["test"])
    assert snapshot.as_sent()["tickers"]["BTC/USDT"]["price"] == 101.0


def test_stale_frames_and_candles_opening_after_their_event_are_rejected() -> None:
    path = Path(start_ms=T0 + 10 * 3_600_000)
    path.feed(good(T0, T0 + 1_000))  # 10 h old: a replay of history, not live data
    path.feed(good(T0 + 40 * STEP, T0 + 40 * STEP - 5_000))  # opens after its own event time
    assert path.listener.stats.rejected == {"stale_time": 1, "future_time": 1}
    assert path.listener.stats.ticks_published == 0


# -- absurd but finite prices ----------------------------------------------------------------


def test_absurd_finite_prices_and_spikes_are_rejected_and_counted() -> None:
    path = Path()
    path.feed(good(T0, T0 + 1_000, c=100.0, ticker="ETH/USDT"))
    huge = "1" + "0" * 300  # 1e300, written as Binance writes numbers
    bad = [
        kline_payload(open_ms=T0, event_ms=T0 + 2_000, o="100", h=huge, low="90", c=huge),
        kline_payload(open_ms=T0, event_ms=T0 + 2_000, o=huge, h=huge, low=huge, c=huge),
        kline_payload(
            ticker="ETH/USDT", open_ms=T0, event_ms=T0 + 2_000, o="1", h="1", low="1", c="1.00"
        ),  # 1.00 for ETH
        kline_payload(
            ticker="ETH/USDT", open_ms=T0, event_ms=T0 + 2_000, o="300", h="300", low="300", c="300"
        ),  # a spike to 3x
        kline_payload(open_ms=T0, event_ms=T0 + 2_000, v=huge),
    ]
    for payload in bad:
        path.feed(payload)
    path.feed(good(T0, T0 + 3_000, c=101.0, ticker="ETH/USDT"))
    stats = path.listener.stats
    assert stats.rejected == {"implausible_price": 4, "implausible_volume": 1}
    assert stats.ticks_published == 2
    assert path.aggregator.last_price("ETH/USDT") == 101.0


def test_the_seeded_history_anchors_the_first_frame() -> None:
    path = Path()
    path.aggregator.seed("ETH/USDT", "15m", [Candle(open_time_ms=T0 - STEP, open=2000.0,
        high=2010.0, low=1990.0, close=2000.0, volume=5.0)])  # fmt: skip
    path.feed(kline_payload(ticker="ETH/USDT", open_ms=T0, o="1", h="1", low="1", c="1"))
    assert path.listener.stats.rejected == {"implausible_price": 1}


def test_a_level_held_long_enough_becomes_the_new_anchor() -> None:
    path = Path()
    path.feed(good(T0, T0 + 1_000, c=100.0))
    for i in range(2, 80):  # the market really moved 2x (seen after a long outage, say)
        path.clock.set_ms(T0 + i * 1_000)
        path.feed(kline_payload(open_ms=T0, event_ms=T0 + i * 1_000, o="200", h="201",
            low="199", c="200"))  # fmt: skip
    assert path.aggregator.last_price("BTC/USDT") == 200.0
    assert path.listener.guard.reanchored == 1
    assert path.listener.stats.rejected["implausible_price"] == 60  # one minute of clock time


async def test_one_ticker_with_bad_numbers_is_unavailable_and_the_others_are_decided() -> None:
    path = Path()
    for ticker in TICKERS:
        path.feed(good(T0, T0 + 1_000, c=100.0, ticker=ticker))

    class BrokenFeatures:
        def features(self, ticker: str) -> TickFeatures | None:
            found = path.features.features(ticker)
            if ticker == "ETH/USDT" and found is not None:
                return found.model_copy(update={"return_zscore": float("inf")})
            return found

    class FailingMarket:
        def last_price(self, ticker: str) -> float | None:
            return path.aggregator.last_price(ticker)

        def closed_arrays(self, ticker: str, timeframe: str) -> CandleArrays:
            if ticker == "BTC/USDT":
                raise OverflowError("year 292278994 is out of range")
            return path.aggregator.closed_arrays(ticker, timeframe)

    snapshot = await builder(path.clock, FailingMarket(), BrokenFeatures()).build(["test"])
    sent = snapshot.as_sent()  # no non-finite number left to fail on
    assert sent["tickers"]["ETH/USDT"]["price"] is None
    assert "non-finite" in sent["unavailable"]["tickers.ETH/USDT"]
    assert sent["tickers"]["BTC/USDT"]["price"] is None
    assert "OverflowError" in sent["unavailable"]["tickers.BTC/USDT"]
    assert sent["portfolio_value"] == 10_000.0  # the rest of the snapshot is there


# -- early closes ----------------------------------------------------------------------------


def test_an_early_close_is_rejected_and_the_real_close_wins() -> None:
    path = Path()
    path.feed(good(T0, T0 + 1_000, v="1.0"))
    path.feed(good(T0, T0 + 60_000, v="0.5", closed=True))  # x=true 14 minutes early
    for i in range(2, 14):
        path.clock.set_ms(T0 + i * 60_000)
        path.feed(good(T0, T0 + i * 60_000, v=f"{i}.0"))
    path.clock.set_ms(T0 + STEP)
    path.feed(good(T0, T0 + STEP - 249, c=102.0, v="10.0", closed=True))  # the real close
    assert [(c.close, c.volume) for c in path.closed] == [(102.0, 10.0)]
    assert path.listener.stats.rejected == {"early_close": 1}
    assert path.listener.stats.ticks_published == 14


def test_a_later_different_close_from_the_exchange_corrects_the_provisional_one() -> None:
    path = Path(start_ms=T0 + STEP)
    path.feed(good(T0, T0 + STEP, v="0.5", closed=True))  # provisional
    path.feed(good(T0, T0 + STEP + 5, v="10.0", closed=True))  # corrected
    path.feed(good(T0, T0 + STEP + 9, v="10.0", closed=True))  # same again: a duplicate
    assert [c.volume for c in path.closed] == [0.5, 10.0]
    assert [c.volume for c in path.aggregator.closed("BTC/USDT", "15m")] == [10.0]
    assert path.listener.stats.corrected_closes == 1
    assert path.listener.stats.rejected == {"duplicate": 1}


def test_the_rejection_counter_counts_per_reason() -> None:
    counter = RejectionCounter()
    for reason in ("b", "a", "b"):
        counter.add(reason)
    assert counter.as_dict() == {"a": 1, "b": 2}
    assert (counter.total, counter["b"], counter["zzz"]) == (3, 2, 0)


# -- the hostile mix -------------------------------------------------------------------------

steps = st.lists(
    st.tuples(
        st.sampled_from(TICKERS),
        st.integers(1, 120_000),  # ms to the next good frame
        st.floats(-0.01, 0.01),  # relative price move
        st.lists(st.sampled_from(IN_PROCESS_KINDS), max_size=3),  # bad frames after it
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=examples(150), deadline=None)
@given(steps=steps, seed=st.integers(0, 2**32))
async def test_hostile_frames_are_counted_and_never_cost_a_good_frame(
    steps: list[tuple[str, int, float, list[HostileKind]]], seed: int
) -> None:
    rng = random.Random(seed)
    path = Path(start_ms=T0)
    now_ms, price = T0, {t: 100.0 for t in TICKERS}
    volume = dict.fromkeys(TICKERS, 0.0)
    bad_sent = 0
    for ticker, gap_ms, move, kinds in steps:
        now_ms += gap_ms
        path.clock.set_ms(now_ms)
        open_ms = now_ms - now_ms % STEP
        price[ticker] *= 1.0 + move
        volume[ticker] += 1.0
        template = combined(good(open_ms, now_ms, c=price[ticker], ticker=ticker,
            v=f"{volume[ticker]:.1f}"))  # fmt: skip
        path.listener.frames.on_frame(orjson.dumps(template))  # must not raise
        for kind in kinds:
            path.listener.frames.on_frame(hostile_frame(kind, template, now_ms, rng))
            bad_sent += 1
    stats = path.listener.stats
    assert stats.ticks_published == len(steps)  # no good frame after a bad one was dropped
    assert sum(stats.rejected.values()) == bad_sent  # every bad frame counted under a reason
    assert "parse_error" not in stats.rejected
    for ticker in TICKERS:
        for candle in [*path.aggregator.closed(ticker, "15m"), *path.closed]:
            assert candle.low <= min(candle.open, candle.close)
            assert max(candle.open, candle.close) <= candle.high < 1e9
        assert path.aggregator.last_price(ticker) in (None, float(f"{price[ticker]:.2f}"))
    snapshot = await path.snapshot_builder().build(["test"])
    sent = snapshot.as_sent()  # a decider could be sent it
    assert all(f"tickers.{t}" not in sent["unavailable"] for t in TICKERS if volume[t])
