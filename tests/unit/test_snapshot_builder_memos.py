"""SnapshotBuilder's per-close memos give what a builder that never saw the series before gives."""

from __future__ import annotations

import asyncio

from fakes.brokers import IdleBroker
from hypothesis import given, settings
from hypothesis import strategies as st
from market_test_support import make_tick
from property_budget import examples

from agent.snapshot_builder import SnapshotBuilder
from core.bus import EventBus
from core.clock import VirtualClock
from core.events import MarketTick
from market.aggregator import MultiTFAggregator

TICKER = "BTC/USDT"
START_MS = 1_740_787_200_000
HOUR_MS = 3_600_000


class NoFeatures:
    def features(self, ticker: str) -> None:
        return None


async def _no_regime() -> None:
    return None


def _builder(agg: MultiTFAggregator) -> SnapshotBuilder:
    return SnapshotBuilder(
        VirtualClock(epoch_ms=START_MS),
        tickers=(TICKER,),
        market=agg,
        features=NoFeatures(),
        broker=IdleBroker(),
        agent_memory=lambda: "",
        peak_prices=dict,
        regime=_no_regime,
    )


def _hour_close(hour: int, volume: float, close: float = 100.0) -> MarketTick:
    return make_tick(
        ticker=TICKER,
        timeframe="1h",
        open_ms=START_MS + hour * HOUR_MS,
        o=close,
        h=close,
        low=close,
        c=close,
        v=volume,
        closed=True,
    )


async def _volume(builder: SnapshotBuilder) -> float | None:
    return (await builder.build([])).tickers[TICKER].volume_24h


_VOLUMES = st.floats(min_value=0.0, max_value=1e6, allow_nan=False)


@settings(max_examples=examples(40), deadline=None)
@given(
    first=st.integers(min_value=0, max_value=30),
    steps=st.lists(
        st.tuples(
            st.sampled_from(["close", "correct", "read"]),
            _VOLUMES,
        ),
        min_size=1,
        max_size=60,
    ),
)
def test_the_remembered_24h_volume_equals_a_fresh_builders(
    first: int, steps: list[tuple[str, float]]
) -> None:
    """Closes, corrections of the newest close and reads in any order (after ``first`` closes,
    so both sides of the 24 needed are seen): the builder that kept its 24h volume between reads
    says what a new builder says, and what the 1h volumes sum to."""

    async def run() -> None:
        agg = MultiTFAggregator(EventBus())
        kept = _builder(agg)
        volumes = [float(hour % 7) * 10.0 for hour in range(first)]
        for hour, volume in enumerate(volumes):
            agg.update(_hour_close(hour, volume))
        for kind, volume in steps:
            if kind == "close":
                agg.update(_hour_close(len(volumes), volume))
                volumes.append(volume)
            elif kind == "correct" and volumes:
                agg.update(_hour_close(len(volumes) - 1, volume, close=101.0))
                volumes[-1] = volume
            got = await _volume(kept)
            assert got == await _volume(_builder(agg))
            if len(volumes) >= 24:
                assert got is not None
                assert abs(got - sum(volumes[-24:])) <= 1e-9 * max(1.0, sum(volumes[-24:]))
            else:
                assert got is None

    asyncio.run(run())
