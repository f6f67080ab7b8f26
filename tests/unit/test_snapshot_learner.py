"""The learner in the snapshot: per-ticker posteriors under the one regime key, and each decision's
Thompson draw, seeded from the run's seed and the decision id (replays draw the same numbers)."""

from __future__ import annotations

import random

from snapshot_support import START_MS, TICKERS, FakeBroker, returning, seeded  # noqa: F401

from agent.snapshot_builder import SnapshotBuilder
from core.bus import EventBus
from core.clock import VirtualClock
from core.events import PositionExit, Topic
from learner.online import OnlineLearner
from market.aggregator import MultiTFAggregator
from market.features import FeatureTracker
from regime.snapshot import RegimeSnapshot

#: BTC wild, ETH calm: the combined label is BTC's volatility x macro, as live
REGIME = RegimeSnapshot(
    crypto={"BTC/USDT": "high_volatility", "ETH/USDT": "medium_volatility"},
    crypto_exposure={"BTC/USDT": 0.6, "ETH/USDT": 0.8},
    macro="unavailable",
    macro_exposure=1.0,
    combined="high_volatility_unavailable",
    exposure_scale=0.6,
)


def _exit(bus: EventBus, pnl_pct: float, at_ms: int) -> None:
    """An exit as the tracker publishes it: tagged with the ticker's crypto regime at entry."""
    bus.publish(
        PositionExit(
            at_ms=at_ms,
            ticker="ETH/USDT",
            reason="agent_exit",
            pnl_pct=pnl_pct,
            holding_secs=3600.0,
            regime="medium_volatility",
            signals={"rsi": 0.8, "momentum": -0.4},
        )
    )


def _learned(n_exits: int) -> OnlineLearner:
    learner, bus = OnlineLearner(None), EventBus()
    bus.subscribe(Topic.POSITION_EXIT, learner.on_position_exit)
    for i in range(n_exits):
        _exit(bus, 3.0 if i % 2 == 0 else -1.0, START_MS - (n_exits - i) * 3_600_000)
    return learner


def _builder(
    market: tuple[MultiTFAggregator, FeatureTracker], learner: OnlineLearner, seed: int = 42
) -> SnapshotBuilder:
    agg, features = market
    return SnapshotBuilder(
        VirtualClock(epoch_ms=START_MS),
        tickers=TICKERS,
        market=agg,
        features=features,
        broker=FakeBroker(),
        agent_memory=lambda: "",
        peak_prices=lambda: {},
        regime=returning(REGIME),
        learner=learner,
        draw_seed=seed,
    )


def test_a_combined_label_reads_the_posteriors_its_volatility_regime_learned() -> None:
    """The bug: exits keyed ``medium_volatility``, look-ups by ``..._unavailable``: never met."""
    learner = _learned(3)
    assert learner.posteriors("medium_volatility_unavailable")["in_force"] == "regime"
    assert learner.posteriors("medium_volatility")["regime_trades"] == 3
    assert learner.posteriors("unknown")["in_force"] == "global"


async def test_each_ticker_sees_the_posteriors_of_its_own_regime(
    seeded: tuple[MultiTFAggregator, FeatureTracker],  # noqa: F811
) -> None:
    snap = await _builder(seeded, _learned(3)).build(["agent_timer"], decision_id="d1-1")
    assert snap.ts_posteriors is not None
    views = snap.ts_posteriors["tickers"]
    assert set(views) == set(TICKERS)
    assert views["ETH/USDT"]["in_force"] == "regime"
    assert views["ETH/USDT"]["regime"] == "medium_volatility"
    assert views["ETH/USDT"]["regime_trades"] == 3
    assert views["BTC/USDT"]["in_force"] == "global"  # high_volatility: no trade yet
    assert views["SOL/USDT"]["regime"] is None  # no regime estimate for SOL: global
    assert views["SOL/USDT"]["in_force"] == "global"


async def test_the_draw_sits_beside_the_means_and_is_seeded_by_run_and_decision(
    seeded: tuple[MultiTFAggregator, FeatureTracker],  # noqa: F811
) -> None:
    learner = _learned(4)
    builder = _builder(seeded, learner)
    first = await builder.build([], decision_id="d1-1")
    again = await _builder(seeded, learner).build([], decision_id="d1-1")
    other = await builder.build([], decision_id="d1-2")
    reseeded = await _builder(seeded, learner, seed=7).build([], decision_id="d1-1")
    assert first.ts_posteriors == again.ts_posteriors  # same run seed, same decision: same draw
    assert first.ts_posteriors is not None and other.ts_posteriors is not None
    assert reseeded.ts_posteriors is not None
    assert first.ts_posteriors["draw_seed"] == "42:d1-1"

    def draws(view: dict[str, object]) -> dict[str, dict[str, float]]:
        tickers = view["tickers"]
        assert isinstance(tickers, dict)
        return {
            t: {name: s["draw"] for name, s in v["signals"].items()} for t, v in tickers.items()
        }

    assert draws(first.ts_posteriors) != draws(other.ts_posteriors)
    assert draws(first.ts_posteriors) != draws(reseeded.ts_posteriors)
    # one Random for the decision, tickers in name order, each from its regime's table
    rng = random.Random("42:d1-1")
    expected = {t: learner.draw(REGIME.crypto.get(t), rng) for t in sorted(TICKERS)}
    assert draws(first.ts_posteriors) == expected
    eth = first.ts_posteriors["tickers"]["ETH/USDT"]["signals"]
    assert set(eth["rsi"]) == {"alpha", "beta", "mean", "trades", "draw"}
    assert 0.0 < eth["rsi"]["draw"] < 1.0
