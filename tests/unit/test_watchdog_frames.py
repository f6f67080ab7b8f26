"""The watchdog's per-stream frames against the plain definition: each tick formats its stream's
name afresh and keeps its ms and real seconds in two tables (the handler memoises the name and
keeps both in one)."""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st
from property_budget import examples

from core.bus import EventBus
from core.clock import Clock, VirtualClock
from core.events import Event, MarketTick
from runner.watchdog import Watchdog
from sim.tick_rows import make_tick

TICKERS = ("BTC/USDT", "ETH/USDT", "SOL/USDT")
TIMEFRAMES = ("5m", "15m", "1h", "4h")
INITIAL = ["BTC/USDT 15m", "ETH/USDT 15m", "SOL/USDT 1h"]


class PlainFrames:
    """The watchdog's frame bookkeeping as it was written before the memos."""

    def __init__(self, clock: Clock, streams: list[str], real_secs: Callable[[], float]) -> None:
        self._clock = clock
        self._real_secs = real_secs
        self._watch_start_real_secs = real_secs()
        self._last_frame_ms: dict[str, int | None] = dict.fromkeys(streams)
        self._last_frame_real_secs: dict[str, float] = {}
        self.last_data_secs = clock.monotonic_secs()

    def on_market_data(self, event: Event) -> None:
        self.last_data_secs = self._clock.monotonic_secs()
        if isinstance(event, MarketTick):
            stream = f"{event.ticker} {event.timeframe}"
            self._last_frame_ms[stream] = self._clock.now_ms()
            self._last_frame_real_secs[stream] = self._real_secs()

    def last_frames_ms(self) -> dict[str, int | None]:
        return dict(self._last_frame_ms)

    def market_report(self) -> dict[str, dict[str, float | int | None]]:
        now = self._real_secs()
        return {
            stream: {
                "last_frame_ms": last_ms,
                "silent_real_secs": round(
                    now - self._last_frame_real_secs.get(stream, self._watch_start_real_secs), 3
                ),
            }
            for stream, last_ms in self._last_frame_ms.items()
        }


class SteppedClock:
    """A clock (not a virtual one) whose ms may move while its seconds stay the very same
    object: the watchdog must read its ms at every frame."""

    def __init__(self) -> None:
        self.secs = 5.0
        self.ms = 1_000

    def now_ms(self) -> int:
        return self.ms

    def monotonic_secs(self) -> float:
        return self.secs

    async def sleep(self, secs: float) -> None:
        raise NotImplementedError


class Ticking:
    """A fake real clock: every read is a new value."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        self.now += 0.0137
        return self.now


def _tick(ticker: str, timeframe: str, at_ms: int) -> MarketTick:
    return make_tick(ticker, timeframe, (0, 59_999, 1.0, 2.0, 0.5, 1.5, 3.0, False), at_ms)


steps = st.lists(
    st.one_of(
        st.tuples(st.just("tick"), st.sampled_from(TICKERS), st.sampled_from(TIMEFRAMES)),
        st.tuples(st.just("other"), st.just(""), st.just("")),
        # the clock moves (or is set to an equal value: a new object with the same ms)
        st.tuples(
            st.just("move"), st.sampled_from(["0", "0.0004", "0.001", "75", "0.5"]), st.just("")
        ),
        st.tuples(st.just("same"), st.just(""), st.just("")),
        st.tuples(st.just("report"), st.just(""), st.just("")),
    ),
    max_size=80,
)


def _run(clock: Clock, move: Callable[[str], None], script: list[tuple[str, str, str]]) -> None:
    real_new, real_old = Ticking(), Ticking()
    dog = Watchdog(clock, EventBus(), streams=INITIAL, real_secs=real_new)
    plain = PlainFrames(clock, INITIAL, real_old)
    for kind, a, b in script:
        if kind == "tick":
            tick = _tick(a, b, clock.now_ms())
            dog.on_market_data(tick)
            plain.on_market_data(tick)
        elif kind == "other":
            dog.on_market_data(Event())
            plain.on_market_data(Event())
        elif kind in ("move", "same"):
            move(a)
        else:
            assert dog.market_report() == plain.market_report()
        assert dog.silence_secs() == clock.monotonic_secs() - plain.last_data_secs
        assert dog.last_frames_ms() == plain.last_frames_ms()
        assert list(dog.last_frames_ms()) == list(plain.last_frames_ms())
    assert dog.market_report() == plain.market_report()


@settings(max_examples=examples(300), deadline=None)
@given(steps)
def test_frames_on_a_virtual_clock_are_the_plain_ones(script: list[tuple[str, str, str]]) -> None:
    clock = VirtualClock(epoch_ms=1_748_736_000_000)

    def move(by: str) -> None:
        if by == "":  # the same value as a new float object
            clock._now_secs = float(repr(clock._now_secs))
        else:
            clock._now_secs += float(by)

    _run(clock, move, script)


@settings(max_examples=examples(100), deadline=None)
@given(steps)
def test_frames_on_another_clock_read_its_ms_at_every_frame(
    script: list[tuple[str, str, str]],
) -> None:
    clock = SteppedClock()

    def move(by: str) -> None:
        clock.ms += 7
        if by:
            clock.secs += float(by)

    _run(clock, move, script)


def test_a_new_stream_is_reported_after_the_initial_ones_in_first_frame_order() -> None:
    clock = VirtualClock(epoch_ms=1_000_000)
    dog = Watchdog(clock, EventBus(), streams=["ETH/USDT 15m"], real_secs=lambda: 1.0)
    for ticker, timeframe in [("SOL/USDT", "4h"), ("ETH/USDT", "15m"), ("BTC/USDT", "5m")]:
        dog.on_market_data(_tick(ticker, timeframe, 1_000_000))
    assert list(dog.last_frames_ms()) == ["ETH/USDT 15m", "SOL/USDT 4h", "BTC/USDT 5m"]
