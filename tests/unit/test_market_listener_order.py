"""The listener's per-stream ordering rules, on wide random frame sequences (no sockets)."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st
from market_test_support import make_tick
from property_budget import examples

from core.bus import EventBus
from core.clock import VirtualClock
from core.events import MarketTick
from market.listener import MarketListener

STEP = 900_000
T0 = 1_740_787_200_000


def _listener() -> MarketListener:
    # nothing connects until run(): the constructor only builds the URL and the stream table
    return MarketListener(
        VirtualClock(T0), EventBus(), base_url="ws://127.0.0.1:1", tickers=["BTC/USDT"]
    )


def test_the_url_names_every_stream_of_the_combined_connection() -> None:
    listener = MarketListener(
        VirtualClock(T0),
        EventBus(),
        base_url="wss://fstream.binance.com/",
        tickers=["BTC/USDT", "SOL/USDT"],
        timeframes=["15m", "4h"],
    )
    assert listener.url == (
        "wss://fstream.binance.com/market/stream?streams="
        "btcusdt@kline_15m/btcusdt@kline_4h/solusdt@kline_15m/solusdt@kline_4h"
    )


frames = st.lists(
    st.tuples(st.integers(0, 6), st.integers(0, 40), st.booleans()),  # candle, event step, x
    min_size=1,
    max_size=60,
)


@settings(max_examples=examples(300), deadline=None)
@given(frames=frames)
def test_accepted_ticks_never_go_back_nor_repeat(frames: list[tuple[int, int, bool]]) -> None:
    listener = _listener()
    stream = listener.frames.streams[("BTC/USDT", "15m")]
    accepted: list[MarketTick] = []
    for candle, event_step, closed in frames:
        tick = make_tick(
            open_ms=T0 + candle * STEP, event_ms=T0 + event_step * 60_000, closed=closed
        )
        if listener.frames.in_order(stream, tick):
            accepted.append(tick)
    keys = [(t.open_time_ms, t.event_time_ms) for t in accepted]
    assert [k[0] for k in keys] == sorted(k[0] for k in keys)  # open times never go back
    assert [k[1] for k in keys] == sorted(k[1] for k in keys)  # nor event times
    closed_opens = [t.open_time_ms for t in accepted if t.closed]
    assert len(closed_opens) == len(set(closed_opens))  # each candle closes at most once
    for i, tick in enumerate(accepted):
        if tick.closed:  # nothing more about a candle after its close
            assert all(t.open_time_ms > tick.open_time_ms for t in accepted[i + 1 :])
    for a, b in itertools.pairwise(accepted):  # no identical push twice in a row
        assert (a.open_time_ms, a.event_time_ms, a.closed) != (
            b.open_time_ms,
            b.event_time_ms,
            b.closed,
        )
    stats = listener.stats
    assert sum(stats.rejected.values()) + len(accepted) == len(frames)
    assert set(stats.rejected) <= {"out_of_order", "duplicate"}
    if accepted:  # the first frame of a stream is always taken
        assert accepted[0].open_time_ms == T0 + frames[0][0] * STEP
