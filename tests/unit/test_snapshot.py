"""MarketSnapshot: every null says why, serialisation is deterministic, a broken source is contained."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest
from snapshot_support import START_MS, TICKERS, FakeBroker, make_builder, returning, seeded  # noqa: F401

from agent.snapshot_builder import NOT_WIRED, SnapshotBuilder
from core.clock import VirtualClock
from core.errors import HaltTradingError
from core.events import MarketTick
from derivatives.fields import CONTEXT_FIELDS
from market.aggregator import MultiTFAggregator
from market.features import FeatureTracker
from regime.snapshot import RegimeSnapshot


@dataclass
class Reading:
    values: Mapping[str, Any]
    unavailable: Mapping[str, str] = field(default_factory=dict)


class FundingSource:
    name = "funding"

    async def read(self) -> Reading:
        return Reading(
            values={"funding_rates": {"BTC/USDT": 0.0001}},
            unavailable={"open_interest": "not in the recorded data"},
        )


class BrokenSource:
    name = "sentiment"

    async def read(self) -> Reading:
        raise TimeoutError("alternative.me did not answer")


async def test_every_null_field_has_a_reason(
    seeded: tuple[MultiTFAggregator, FeatureTracker],  # noqa: F811
) -> None:
    snap = await make_builder(*seeded).build(["candle_close:BTC/USDT:4h"])
    dumped = snap.model_dump()
    for name in CONTEXT_FIELDS:
        assert dumped[name] is None
        assert snap.unavailable[name] == NOT_WIRED["context"]
    assert snap.unavailable["ts_posteriors"] == NOT_WIRED["learner"]
    assert snap.unavailable["historical_insights"] == NOT_WIRED["insights"]
    assert snap.regime is None and "regime" in snap.unavailable
    assert snap.exposure_scale == 1.0  # no regime: no scaling, said so above


async def test_market_portfolio_and_memory_are_filled(
    seeded: tuple[MultiTFAggregator, FeatureTracker],  # noqa: F811
) -> None:
    snap = await make_builder(*seeded).build(["agent_timer"])
    btc = snap.tickers["BTC/USDT"]
    assert snap.btc_price == btc.price == seeded[0].last_price("BTC/USDT")
    assert btc.volume_24h is not None and btc.volume_24h > 0
    assert btc.return_24h_pct is not None
    assert set(btc.multi_tf) == {"15m", "1h", "4h"}
    assert btc.multi_tf["1h"].trend in {"up", "down", "flat"}
    (pos,) = snap.open_positions
    assert pos.pnl_pct == pytest.approx(5.0) and pos.peak_price == 150.0
    assert pos.holding_secs == 3600.0
    assert (snap.portfolio_value, snap.cash) == (10_014.0, 9_720.0)
    assert snap.agent_memory.startswith("BTC chops")
    assert snap.gate_wake_reasons == ["agent_timer"]


async def test_sources_fill_fields_and_a_broken_one_only_costs_its_fields(
    seeded: tuple[MultiTFAggregator, FeatureTracker],  # noqa: F811
) -> None:
    snap = await make_builder(*seeded, sources=[FundingSource(), BrokenSource()]).build([])
    assert snap.funding_rates == {"BTC/USDT": 0.0001}
    assert "funding_rates" not in snap.unavailable
    assert snap.unavailable["open_interest"] == "not in the recorded data"
    assert snap.unavailable["fear_greed"].startswith("sentiment failed: TimeoutError")


class InstantSource:
    """Holds its reading in memory: ``read_now`` is taken, ``read`` (which would hang) never."""

    name = "instant"

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail

    async def read(self) -> Reading:
        await asyncio.Event().wait()
        raise AssertionError("read_now was there to take")

    def read_now(self) -> Reading:
        if self.fail:
            raise ValueError("reading torn")
        return Reading(values={"funding_rates": {"BTC/USDT": 0.0002}})


async def test_a_source_in_memory_is_read_without_waiting_and_still_contained(
    seeded: tuple[MultiTFAggregator, FeatureTracker],  # noqa: F811
) -> None:
    snap = await make_builder(*seeded, sources=[InstantSource()]).build([])
    assert snap.funding_rates == {"BTC/USDT": 0.0002}
    broken = await make_builder(*seeded, sources=[InstantSource(fail=True)]).build([])
    assert broken.funding_rates is None
    assert broken.unavailable["funding_rates"] == "instant failed: ValueError: reading torn"


async def test_broker_down_gives_nulls_with_reason(
    seeded: tuple[MultiTFAggregator, FeatureTracker],  # noqa: F811
) -> None:
    snap = await make_builder(*seeded, broker=FakeBroker(fail=True)).build([])
    assert snap.portfolio_value is None and snap.cash is None and snap.open_positions == []
    assert "exchange down" in snap.unavailable["portfolio_value"]


class ShortBroker(FakeBroker):
    async def get_positions_detail(self) -> Any:
        raise HaltTradingError(
            "short position of -0.1 SOL/USDT on the exchange; vigil is long-only"
        )


async def test_a_broker_that_says_halt_is_not_taken_for_a_broker_down(
    seeded: tuple[MultiTFAggregator, FeatureTracker],  # noqa: F811
) -> None:
    """A HaltTradingError (a short position on the account) was caught as "broker unavailable":
    the decision went on without the portfolio and nothing halted until another loop met it.
    It reaches the routine, which halts trading (``test_trading_state``)."""
    with pytest.raises(HaltTradingError, match="long-only"):
        await make_builder(*seeded, broker=ShortBroker()).build([])


async def test_regime_sets_exposure_scale(seeded: tuple[MultiTFAggregator, FeatureTracker]) -> None:  # noqa: F811
    regime = RegimeSnapshot(
        crypto={"BTC/USDT": "high_volatility"},
        crypto_exposure={"BTC/USDT": 0.6},
        macro="unavailable",
        macro_exposure=1.0,
        combined="high_volatility_unavailable",
        exposure_scale=0.6,
    )
    snap = await make_builder(*seeded, regime=regime).build([])
    assert snap.exposure_scale == 0.6 and "regime" not in snap.unavailable


async def test_serialisation_is_compact_deterministic_and_rejects_nan(
    seeded: tuple[MultiTFAggregator, FeatureTracker],  # noqa: F811
) -> None:
    first = await make_builder(*seeded).build(["x"])
    second = await make_builder(*seeded).build(["x"])
    assert first.to_json_bytes() == second.to_json_bytes()
    assert first.digest() == second.digest()
    raw = first.to_json_bytes()
    assert b"\n" not in raw and b": " not in raw
    assert orjson.loads(raw)["btc_price"] == first.btc_price
    broken = first.model_copy(update={"btc_price": float("nan")})
    with pytest.raises(ValueError, match="non-finite"):
        broken.to_json_bytes()


async def test_as_sent_is_made_once_and_a_copy_with_an_update_makes_its_own(
    seeded: tuple[MultiTFAggregator, FeatureTracker],  # noqa: F811
) -> None:
    snapshot = await make_builder(*seeded).build(["x"])
    first = snapshot.as_sent()
    first.pop("agent_memory")  # a caller's own top level (the prompt pops the notes)
    second = snapshot.as_sent()
    assert "agent_memory" in second and second is not first
    assert second["tickers"] is first["tickers"]  # the rounding was done once
    moved = snapshot.model_copy(update={"btc_price": 1.25})
    assert moved.as_sent()["btc_price"] == 1.25 and snapshot.as_sent()["btc_price"] != 1.25
    assert orjson.loads(moved.to_json_bytes())["btc_price"] == 1.25


async def test_timeframe_summaries_follow_each_close_and_equal_a_fresh_computation(
    seeded: tuple[MultiTFAggregator, FeatureTracker],  # noqa: F811
) -> None:
    agg, features = seeded
    builder = make_builder(agg, features)
    before = (await builder.build(["agent_timer"])).tickers["BTC/USDT"].multi_tf
    last = agg.last_closed("BTC/USDT", "15m")
    assert last is not None
    jump = last.close * 1.05  # a big close: the 15m RSI and bands must move
    agg.update(
        MarketTick(
            ticker="BTC/USDT",
            timeframe="15m",
            open_time_ms=START_MS,
            close_time_ms=START_MS + 899_999,
            open=last.close,
            high=jump,
            low=last.close,
            close=jump,
            volume=1.0,
            closed=True,
            event_time_ms=START_MS + 899_999,
        )
    )
    after = (await builder.build(["candle_close:BTC/USDT:15m"])).tickers["BTC/USDT"].multi_tf
    fresh = (await make_builder(agg, features).build(["agent_timer"])).tickers["BTC/USDT"].multi_tf
    assert after == fresh  # the cached summaries are what a new builder computes
    assert after["15m"] != before["15m"]
    assert after["1h"] == before["1h"]  # no 1h close: the same summary


class ManyTradesLearner:
    def posteriors(self, regime: str | None) -> dict[str, Any]:
        return {"in_force": "global", "regime": regime, "signals": {}}

    def draw(self, regime: str | None, rng: random.Random) -> dict[str, float]:
        return {}

    def recent_trades(self, last: int | None = None) -> list[dict[str, Any]]:
        return [{"at_ms": i, "pnl_pct": 0.1 * i} for i in range(50)]  # more than asked


async def test_the_decider_reads_the_newest_ten_of_the_learners_trades(
    seeded: tuple[MultiTFAggregator, FeatureTracker],  # noqa: F811
) -> None:
    agg, features = seeded
    builder = SnapshotBuilder(
        VirtualClock(epoch_ms=START_MS),
        tickers=TICKERS,
        market=agg,
        features=features,
        broker=FakeBroker(),
        agent_memory=lambda: "",
        peak_prices=dict,
        regime=returning(None),
        context_sources=(),
        learner=ManyTradesLearner(),
    )
    snap = await builder.build(["agent_timer"])
    assert snap.recent_trades is not None
    assert [t["at_ms"] for t in snap.recent_trades] == list(range(40, 50))


class PaxgSource:
    name = "hedge"

    def __init__(self, return_4h_pct: float) -> None:
        self.return_4h_pct = return_4h_pct

    async def read(self) -> Reading:
        paxg = {"symbol": "PAXGUSDT", "price": 3_000.0, "return_4h_pct": self.return_4h_pct}
        return Reading(values={"paxg": paxg}, unavailable={})


async def test_the_gold_hedge_is_part_of_the_regime_context(
    seeded: tuple[MultiTFAggregator, FeatureTracker],  # noqa: F811
) -> None:
    regime = RegimeSnapshot(
        crypto={"BTC/USDT": "low_volatility"},
        crypto_exposure={"BTC/USDT": 1.0},
        macro="unavailable",
        macro_exposure=1.0,
        combined="low_volatility_unavailable",
        exposure_scale=1.0,
    )
    snap = await make_builder(*seeded, regime=regime, sources=[PaxgSource(0.25)]).build([])
    assert snap.regime is not None and snap.regime.gold_hedge is not None
    hedge = snap.regime.gold_hedge
    assert hedge.paxg_price == 3_000.0 and hedge.paxg_return_4h_pct == 0.25
    assert hedge.btc_return_4h_pct == snap.tickers["BTC/USDT"].return_4h_pct
    assert hedge.signal in {"neutral", "flight_to_safety", "risk_on"}
    assert snap.regime.combined == "low_volatility_unavailable"  # context, not a new label
    without = await make_builder(*seeded, regime=regime).build([])
    assert without.regime is not None and without.regime.gold_hedge is not None
    assert without.regime.gold_hedge.signal == "unavailable"
    assert without.regime.gold_hedge.reason == "PAXG 4h return unavailable"
