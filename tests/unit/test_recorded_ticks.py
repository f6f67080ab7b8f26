"""RecordedTicks on a VirtualClock over a synthetic recording (with and without holes)."""

from __future__ import annotations

import asyncio
from collections import Counter, defaultdict
from collections.abc import Callable

import orjson
import pandas as pd
import pytest
import pytest_asyncio
from fakes.virtual_time import drive
from hypothesis import given
from hypothesis import strategies as st
from recorded_ticks_support import (
    DAY_MS,
    SYNTH_START_MS,
    TickLog,
    synthetic_bars,
    until,
    write_recording,
)

from core.bus import EventBus
from core.clock import VirtualClock
from core.events import CandleClosed, Event, MarketGap, Timeframe, Topic
from market.aggregator import MultiTFAggregator
from market.parse import parse_frame
from market.recorded import resample
from market.timeframes import TIMEFRAME_MS
from sim.feed import BAR_MS, SimFeed
from sim.recorded_ticks import RecordedTicks, due_updates
from sim.ws_streams import KlineFormat, Subscription, due_instants, kline_payload, parse_stream

U = 60_000  # 5 updates per 5m bar: small, so a day of virtual time replays fast
TICKER = "BTC/USDT"
TFS: tuple[Timeframe, ...] = ("5m", "15m", "1h", "4h")
HOLE_MS = SYNTH_START_MS + 3_600_000 + 2 * BAR_MS  # the third bar of the 01:00 hour


@pytest.fixture(scope="module")
def bars() -> pd.DataFrame:
    return synthetic_bars(days=1)


@pytest.fixture(scope="module")
def feed(bars: pd.DataFrame, tmp_path_factory: pytest.TempPathFactory) -> SimFeed:
    root = write_recording(tmp_path_factory.mktemp("rec"), "BTCUSDT", bars)
    return SimFeed([TICKER], data_dir=root, update_interval_ms=U)


@pytest.fixture(scope="module")
def holed_feed(bars: pd.DataFrame, tmp_path_factory: pytest.TempPathFactory) -> SimFeed:
    root = write_recording(tmp_path_factory.mktemp("holed"), "BTCUSDT", bars.drop(index=HOLE_MS))
    return SimFeed([TICKER], data_dir=root, update_interval_ms=U)


class Replay:
    """One RecordedTicks on a fresh bus and VirtualClock, with a tick log and an aggregator."""

    def __init__(
        self,
        feed: SimFeed,
        start_ms: int,
        end_ms: int | None,
        tfs: tuple[Timeframe, ...] = TFS,
    ) -> None:
        self.clock = VirtualClock(epoch_ms=start_ms)
        self.bus = EventBus()
        self.log = TickLog(self.bus, self.clock)
        self.aggregator = MultiTFAggregator(self.bus)
        self.bus.subscribe(Topic.MARKET_TICK, self.aggregator.on_tick, name="aggregator")
        self.closes: list[CandleClosed] = []
        self.gaps: list[MarketGap] = []
        self.bus.subscribe(Topic.CANDLE_CLOSED, self._on_close, name="test.closes")
        self.bus.subscribe(Topic.MARKET_GAP, self._on_gap, name="test.gaps")
        self.source = RecordedTicks(
            self.clock, self.bus, feed, tickers=[TICKER], timeframes=tfs, end_ms=end_ms
        )

    def _on_close(self, event: Event) -> None:
        assert isinstance(event, CandleClosed)
        self.closes.append(event)

    def _on_gap(self, event: Event) -> None:
        assert isinstance(event, MarketGap)
        self.gaps.append(event)

    async def run(self) -> None:
        await drive(self.clock, self.source.run())


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def day(feed: SimFeed) -> Replay:
    replay = Replay(feed, SYNTH_START_MS, SYNTH_START_MS + DAY_MS)
    await replay.run()
    return replay


# --- the catch-up rule is the simulator's ---


@given(
    last=st.integers(0, 10**9),
    span=st.integers(0, 3 * 14_400_000),
    tfs=st.lists(st.sampled_from(TFS), min_size=1, max_size=4, unique=True),
)
def test_due_updates_follow_the_simulators_rule(last: int, span: int, tfs: list[str]) -> None:
    subs = [Subscription(parse_stream(f"btcusdt@kline_{tf}", [TICKER], U), 0) for tf in tfs]
    now = last + span
    latest = now - now % U
    ours = due_updates([TIMEFRAME_MS[tf] for tf in tfs], last, latest, U)
    assert ours == due_instants(subs, last, now)


# --- a day on virtual time ---


async def test_every_update_is_published_at_its_instant(day: Replay) -> None:
    ticks = day.log.ticks
    assert ticks, "nothing published"
    assert day.log.published_at_ms == [t.event_time_ms for t in ticks]
    assert all(t.event_time_ms % U == 0 for t in ticks)
    instants = sorted({t.event_time_ms for t in ticks})
    # the recording is one day long: its last update is the end of the run
    assert instants == list(range(SYNTH_START_MS, SYNTH_START_MS + DAY_MS, U))
    # one tick per stream per instant, streams in subscription order
    by_instant: dict[int, list[str]] = defaultdict(list)
    for tick in ticks:
        by_instant[tick.event_time_ms].append(tick.timeframe)
    assert all(tfs == list(TFS) for tfs in by_instant.values())
    assert day.source.stats.ticks_published == len(ticks) == len(instants) * len(TFS)


async def test_each_5m_bar_gets_exactly_updates_per_bar_per_stream(
    day: Replay, feed: SimFeed
) -> None:
    per_bar = Counter((t.timeframe, t.event_time_ms // BAR_MS) for t in day.log.ticks)
    assert set(per_bar.values()) == {feed.updates_per_bar}
    assert len(per_bar) == len(TFS) * DAY_MS // BAR_MS


async def test_closing_updates_carry_the_resampled_candle(day: Replay, bars: pd.DataFrame) -> None:
    for tf in TFS:
        closing = [t for t in day.log.ticks if t.timeframe == tf and t.closed]
        expected = resample(bars, "5m", tf)
        assert [t.open_time_ms for t in closing] == expected.index.tolist()
        for tick, (o, h, low, c, v) in zip(closing, expected.to_numpy().tolist(), strict=True):
            assert tick.event_time_ms == tick.open_time_ms + TIMEFRAME_MS[tf] - U
            assert (tick.open, tick.high, tick.low, tick.close) == (o, h, low, c)
            assert tick.volume == float(f"{v:.3f}")  # the symbol's quantity step, as on the wire
        assert not any(t.closed for t in day.log.ticks if t.timeframe == tf and t not in closing)


async def test_the_aggregator_closes_every_candle_once_in_order(day: Replay) -> None:
    assert day.gaps == []
    for tf in TFS:
        opens = [e.candle.open_time_ms for e in day.closes if e.timeframe == tf]
        step = TIMEFRAME_MS[tf]
        assert opens == list(range(SYNTH_START_MS, SYNTH_START_MS + DAY_MS, step))


async def test_ticks_equal_what_the_listener_parses_from_the_sims_frames(
    day: Replay, feed: SimFeed
) -> None:
    fmt = KlineFormat.of(feed, TICKER)
    for tick in day.log.ticks[::7]:
        spec = parse_stream(f"btcusdt@kline_{tick.timeframe}", [TICKER], U)
        state = feed.kline_state(TICKER, tick.timeframe, tick.event_time_ms)
        assert state is not None
        payload = kline_payload(spec, state, tick.event_time_ms, fmt)
        parsed = parse_frame(orjson.dumps({"stream": spec.name, "data": payload}))
        assert parsed == tick


# --- start, end, restart ---


async def test_run_returns_at_end_ms_and_sets_finished(feed: SimFeed) -> None:
    start, end = SYNTH_START_MS + 7 * U + 1234, SYNTH_START_MS + 3_600_000 + 30_000
    replay = Replay(feed, start, end, tfs=("15m",))
    assert not replay.source.finished.is_set()
    await replay.run()
    assert replay.source.finished.is_set()
    times = [t.event_time_ms for t in replay.log.ticks]
    assert times[0] == SYNTH_START_MS + 8 * U  # the first grid instant at or after the start
    assert times[-1] == end - end % U == replay.source.stop_ms
    assert replay.clock.now_ms() == times[-1]  # returned at once, no sleep past the end
    await replay.source.run()  # again: nothing left to publish
    assert len(replay.log.ticks) == len(times)


async def test_the_end_of_the_recording_ends_the_run(feed: SimFeed) -> None:
    _, last = feed.span_ms(TICKER)
    replay = Replay(feed, last - 3_600_000, None, tfs=("1h",))
    await replay.run()
    assert replay.source.stop_ms == last + 1 - U  # the last update of the last bar
    assert replay.log.ticks[-1].event_time_ms == replay.source.stop_ms
    assert replay.log.ticks[-1].closed


async def test_a_start_before_the_recording_waits_for_its_first_bar(feed: SimFeed) -> None:
    replay = Replay(feed, SYNTH_START_MS - DAY_MS, SYNTH_START_MS + 2 * U, tfs=("15m",))
    await replay.run()
    assert [t.event_time_ms for t in replay.log.ticks] == [SYNTH_START_MS + k * U for k in range(3)]


async def test_a_restarted_run_carries_on_after_the_last_instant(feed: SimFeed) -> None:
    replay = Replay(feed, SYNTH_START_MS, SYNTH_START_MS + 2 * 3_600_000, tfs=("15m", "1h"))
    task = asyncio.create_task(drive(replay.clock, replay.source.run()))
    await until(lambda: len(replay.log.ticks) >= 40)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not replay.source.finished.is_set()
    await replay.clock.advance(5 * U / 1000)  # time moved on while it was down
    await replay.run()
    assert replay.gaps == []
    keys = [(t.event_time_ms, t.timeframe) for t in replay.log.ticks]
    assert [at for at, _ in keys] == sorted(at for at, _ in keys)
    assert len(set(keys)) == len(keys)  # nothing published twice
    for tf in ("15m", "1h"):
        opens = [e.candle.open_time_ms for e in replay.closes if e.timeframe == tf]
        step = TIMEFRAME_MS[tf]
        assert opens == list(range(SYNTH_START_MS, SYNTH_START_MS + 2 * 3_600_000, step))


# --- holes, resume, catch-up ---


async def test_holes_in_the_recording_are_skipped(holed_feed: SimFeed) -> None:
    end = SYNTH_START_MS + 5 * 3_600_000
    replay = Replay(holed_feed, SYNTH_START_MS, end)
    await replay.run()
    published = {(t.timeframe, t.event_time_ms) for t in replay.log.ticks}
    expected = {
        (tf, at)
        for tf in TFS
        for at in range(SYNTH_START_MS, end + 1, U)
        if holed_feed.kline_state(TICKER, tf, at) is not None
    }
    assert published == expected
    assert not any(HOLE_MS <= at < HOLE_MS + BAR_MS for _, at in published)
    hour_end = SYNTH_START_MS + 2 * 3_600_000  # the 1h candle holding the hole ends here
    assert not any(tf == "1h" and HOLE_MS <= at < hour_end for tf, at in published)
    assert any(tf == "1h" and at < HOLE_MS for tf, at in published)  # it was there before
    # the aggregator names the candles the hole swallowed
    assert {(g.timeframe, g.missing_from_ms) for g in replay.gaps} == {
        ("5m", HOLE_MS),
        ("15m", HOLE_MS - HOLE_MS % 900_000),
        ("1h", SYNTH_START_MS + 3_600_000),
    }  # the 4h candle is lost too, but no later 4h close has revealed it yet


async def test_resume_from_publishes_the_closes_missed_before_the_start(feed: SimFeed) -> None:
    start = SYNTH_START_MS + 3 * 3_600_000 + 10 * 60_000
    replay = Replay(feed, start, start + 3 * U, tfs=("15m", "1h"))
    replay.source.resume_from(TICKER, "1h", SYNTH_START_MS)  # knows the 00:00 close only
    with pytest.raises(KeyError):
        replay.source.resume_from(TICKER, "4h", SYNTH_START_MS)
    await replay.run()
    backfill = [t for t in replay.log.ticks if t.event_time_ms < start]
    assert [(t.timeframe, t.open_time_ms) for t in backfill] == [
        ("1h", SYNTH_START_MS + h * 3_600_000) for h in (1, 2)
    ]
    assert all(t.closed and t.event_time_ms == t.close_time_ms for t in backfill)
    assert replay.source.stats.backfilled == 2
    assert [e.candle.open_time_ms for e in replay.closes if e.timeframe == "1h"] == [
        SYNTH_START_MS + 3_600_000,
        SYNTH_START_MS + 2 * 3_600_000,
    ]


class JumpyClock(VirtualClock):
    """Oversleeps every sleep by ``extra_secs``, like a loaded wall clock would."""

    def __init__(self, epoch_ms: int, extra_secs: float) -> None:
        super().__init__(epoch_ms)
        self.extra_secs = extra_secs

    async def sleep(
        self,
        secs: float,
        *,
        idle: Callable[[], bool] | None = None,
        passed: Callable[[], float] | None = None,
    ) -> None:
        await super().sleep(secs + self.extra_secs, idle=idle, passed=passed)


async def test_behind_the_clock_updates_are_skipped_but_never_a_close(feed: SimFeed) -> None:
    clock = JumpyClock(SYNTH_START_MS, extra_secs=11 * U / 1000)
    bus = EventBus()
    log = TickLog(bus, clock)
    end = SYNTH_START_MS + 6 * 3_600_000
    source = RecordedTicks(clock, bus, feed, tickers=[TICKER], timeframes=TFS, end_ms=end)
    await drive(clock, source.run())
    assert len(log.ticks) < (end - SYNTH_START_MS) // U * len(TFS) / 5  # it really fell behind
    for tf in TFS:
        closes = [t.open_time_ms for t in log.ticks if t.timeframe == tf and t.closed]
        assert closes == list(range(SYNTH_START_MS, end - TIMEFRAME_MS[tf] + 1, TIMEFRAME_MS[tf]))
    assert [t.event_time_ms for t in log.ticks] == sorted(t.event_time_ms for t in log.ticks)
    assert all(at >= t.event_time_ms for t, at in zip(log.ticks, log.published_at_ms, strict=True))
    assert log.ticks[-1].event_time_ms == end


def test_stats_have_the_listeners_status_fields(feed: SimFeed) -> None:
    source = RecordedTicks(VirtualClock(), EventBus(), feed, tickers=[TICKER], timeframes=["1h"])
    stats = source.stats
    assert (stats.ticks_published, stats.rejected, stats.reconnects) == (0, {}, {})
    assert stats.last_event_ms is None


def test_bad_arguments_are_refused(feed: SimFeed) -> None:
    with pytest.raises(ValueError, match="at least one"):
        RecordedTicks(VirtualClock(), EventBus(), feed, tickers=[], timeframes=["1h"])
    with pytest.raises(ValueError, match="unsupported"):
        RecordedTicks(VirtualClock(), EventBus(), feed, tickers=[TICKER], timeframes=["1d"])  # type: ignore[list-item]
    with pytest.raises(Exception, match="not in this feed"):
        RecordedTicks(VirtualClock(), EventBus(), feed, tickers=["ETH/USDT"], timeframes=["1h"])
