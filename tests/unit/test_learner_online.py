"""OnlineLearner behaviour: trade window, regime vs global switch, sampling, bus handler."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from property_budget import examples

from agent.snapshot_builder import LearnerView
from core.bus import EventBus
from core.events import DecisionRequested, PositionExit, Topic
from learner.online import OnlineLearner


def trade(
    learner: OnlineLearner,
    signals: dict[str, float],
    pnl_pct: float,
    regime: str | None,
    at_ms: int = 0,
) -> None:
    learner.update(signals, pnl_pct, regime, "BTC/USDT", at_ms, 300.0)


def test_window_keeps_the_last_50_trades_oldest_first() -> None:
    learner = OnlineLearner(None)
    for i in range(60):
        trade(learner, {"rsi": 0.5}, 1.0 if i % 2 else -1.0, "bull", at_ms=i)
    recent = learner.recent_trades()
    assert len(recent) == 50
    assert [t["at_ms"] for t in recent] == list(range(10, 60))
    assert recent[-1] == {
        "ticker": "BTC/USDT",
        "at_ms": 59,
        "pnl_pct": 1.0,
        "holding_secs": 300.0,
        "regime": "bull",
        "signals": {"rsi": 0.5},
    }
    # the window bounds only the trade list: counts and posteriors saw all 60 trades
    assert learner.regime_counts == {"bull": 60}
    assert learner.posteriors(None)["signals"]["rsi"]["trades"] == 60


def test_custom_window() -> None:
    learner = OnlineLearner(None, window=3)
    for i in range(5):
        trade(learner, {"rsi": 0.5}, 1.0, None, at_ms=i)
    assert [t["at_ms"] for t in learner.recent_trades()] == [2, 3, 4]
    assert learner.regime_counts == {}  # no regime: only the global posteriors learn


def test_regime_posterior_takes_over_at_three_trades() -> None:
    learner = OnlineLearner(None)
    # two losing trades in "bear" shape the global posteriors differently from "bull"'s
    trade(learner, {"rsi": 1.0, "derivatives": 1.0}, -4.0, "bear")
    trade(learner, {"rsi": 1.0, "derivatives": 1.0}, -4.0, "bear")
    bull_global_before = learner.posteriors("bull")
    assert bull_global_before["in_force"] == "global"
    for n in (1, 2):
        trade(learner, {"rsi": 1.0}, 6.0, "bull")
        view = learner.posteriors("bull")
        assert view["in_force"] == "global", f"after {n} bull trades"
        assert view["regime_trades"] == n
        assert view["signals"]["rsi"]["trades"] == 2 + n  # the global table: all 2 + n trades
    trade(learner, {"rsi": 1.0}, 6.0, "bull")
    view = learner.posteriors("bull")
    assert view["in_force"] == "regime"
    assert view["regime_trades"] == 3
    assert view["min_regime_trades"] == 3
    # rsi from "bull" alone: three aligned +6 % trades from Beta(1, 1), reward r = sigmoid(0.6)
    # alpha = ((0.95 + r) 0.95 + r) 0.95 + r, beta = 0.95^3
    r = 1 / (1 + math.exp(-0.6))
    assert view["signals"]["rsi"]["alpha"] == pytest.approx(((0.95 + r) * 0.95 + r) * 0.95 + r)
    assert view["signals"]["rsi"]["beta"] == pytest.approx(0.95**3)
    assert view["signals"]["rsi"]["trades"] == 3
    # a signal never seen in "bull" has the prior there
    assert view["signals"]["derivatives"] == {"alpha": 1.0, "beta": 1.0, "mean": 0.5, "trades": 0}
    # "bear" has only 2 trades: still global; no regime: global
    assert learner.posteriors("bear")["in_force"] == "global"
    assert learner.posteriors(None)["in_force"] == "global"
    assert learner.posteriors(None)["signals"]["rsi"]["trades"] == 5
    assert learner.regime_counts == {"bear": 2, "bull": 3}


def test_sample_weights_draw_from_the_posteriors_in_force() -> None:
    learner = OnlineLearner(None)
    for _ in range(3):
        trade(learner, {"rsi": 1.0, "momentum": -1.0}, 8.0, "bull")
    trade(learner, {"rsi": 1.0, "momentum": -1.0}, -8.0, "bear")
    for regime in ("bull", "bear"):
        signals = learner.posteriors(regime)["signals"]
        expected_rng = random.Random(7)
        draws = {
            name: expected_rng.betavariate(signals[name]["alpha"], signals[name]["beta"])
            for name in sorted(signals)
        }
        total = sum(draws.values())
        weights = learner.sample_weights(regime, random.Random(7))
        assert weights == pytest.approx({name: d / total for name, d in draws.items()})
    assert learner.posteriors("bull")["in_force"] == "regime"
    assert learner.posteriors("bear")["in_force"] == "global"


def test_sample_weights_favour_the_signal_that_keeps_being_right() -> None:
    learner = OnlineLearner(None)
    for _ in range(40):
        trade(learner, {"good": 1.0, "bad": -1.0}, 10.0, None)
    rng = random.Random(1)
    mean_good = sum(learner.sample_weights(None, rng)["good"] for _ in range(200)) / 200
    assert mean_good > 0.9


def test_sample_weights_empty_before_any_trade() -> None:
    assert OnlineLearner(None).sample_weights("bull", random.Random(0)) == {}


def test_all_zero_draws_give_equal_weights(caplog: pytest.LogCaptureFixture) -> None:
    learner = OnlineLearner(None)
    for _ in range(3000):  # alpha = 0.95^3000 ~ 1e-67: every Beta draw underflows to 0.0
        trade(learner, {"a": 1.0, "b": -1.0}, 0.0, None)
    weights = learner.sample_weights(None, random.Random(3))
    assert weights == {"a": 0.5, "b": 0.5}
    assert "every Thompson draw was 0" in caplog.text


signal_values = st.floats(-1, 1, allow_nan=False)
trades_strategy = st.lists(
    st.tuples(
        st.dictionaries(
            st.sampled_from(["rsi", "momentum", "bollinger", "derivatives"]), signal_values
        ),
        st.floats(-60, 60, allow_nan=False),
        st.sampled_from([None, "bull", "bear"]),
    ),
    max_size=40,
)


@settings(max_examples=examples(60), deadline=None)
@given(
    trades=trades_strategy,
    seed=st.integers(0, 2**32),
    regime=st.sampled_from([None, "bull", "bear", "unseen"]),
)
def test_weights_are_a_deterministic_distribution_over_seen_signals(
    trades: list[tuple[dict[str, float], float, str | None]], seed: int, regime: str | None
) -> None:
    learner = OnlineLearner(None)
    for signals, pnl_pct, trade_regime in trades:
        trade(learner, signals, pnl_pct, trade_regime)
    weights = learner.sample_weights(regime, random.Random(seed))
    voted = {name for signals, _, _ in trades for name, value in signals.items() if value != 0}
    assert set(weights) == voted
    assert all(w >= 0 and math.isfinite(w) for w in weights.values())
    if weights:
        assert sum(weights.values()) == pytest.approx(1.0)
    assert learner.sample_weights(regime, random.Random(seed)) == weights


def test_bus_handler_learns_from_position_exit_in_percent() -> None:
    learner = OnlineLearner(None)
    bus = EventBus()
    bus.subscribe(Topic.POSITION_EXIT, learner.on_position_exit)
    bus.publish(
        PositionExit(
            at_ms=1_700_000_000_000,
            ticker="ETH/USDT",
            reason="take_profit",
            pnl_pct=5.0,
            holding_secs=3600.0,
            regime="low_volatility_goldilocks",
            signals={"rsi": 0.6},
        )
    )
    rsi = learner.posteriors(None)["signals"]["rsi"]
    # 5 % is pnl 0.05: alpha = 0.95 + sigmoid(0.5) (had it been read as 5.0, reward ~ 1)
    assert rsi["alpha"] == pytest.approx(0.95 + 1 / (1 + math.exp(-0.5)))
    assert learner.regime_counts == {"low_volatility": 1}  # the one regime key (regime_key)
    assert learner.recent_trades()[0]["ticker"] == "ETH/USDT"


def test_bus_handler_rejects_other_events() -> None:
    learner = OnlineLearner(None)
    with pytest.raises(TypeError, match="PositionExit"):
        learner.on_position_exit(DecisionRequested(at_ms=1, reason="watchdog"))


@pytest.mark.parametrize(
    ("signals", "pnl_pct"), [({"rsi": 0.5}, math.nan), ({"rsi": math.inf}, 1.0), ({}, math.inf)]
)
def test_non_finite_trade_is_refused_and_leaves_no_trace(
    signals: dict[str, float], pnl_pct: float
) -> None:
    learner = OnlineLearner(None)
    trade(learner, {"rsi": 0.5}, 1.0, "bull")
    before = (learner.posteriors("bull"), learner.recent_trades(), learner.regime_counts)
    with pytest.raises(ValueError):
        trade(learner, signals, pnl_pct, "bull")
    assert (learner.posteriors("bull"), learner.recent_trades(), learner.regime_counts) == before


def test_empty_regime_label_counts_as_no_regime() -> None:
    learner = OnlineLearner(None)
    trade(learner, {"rsi": 0.5}, 1.0, "")
    assert learner.regime_counts == {}
    assert learner.recent_trades()[0]["regime"] is None


@pytest.mark.parametrize(
    "kwargs",
    [
        {"prior_alpha": 0.0},
        {"prior_beta": -1.0},
        {"discount": 0.0},
        {"discount": 1.5},
        {"window": 0},
    ],
)
def test_bad_settings_are_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        OnlineLearner(None, **kwargs)


def test_learner_is_the_snapshot_builders_learner_view() -> None:
    view: LearnerView = OnlineLearner(None)  # mypy checks the Protocol; the call checks the shape
    view_posteriors = view.posteriors(None)
    assert view_posteriors["in_force"] == "global"
    assert view_posteriors["signals"] == {}
    assert view.recent_trades() == []


def _dumped_again(learner: OnlineLearner) -> list[dict[str, Any]]:
    """The unremembered answer: every trade in the window dumped now."""
    return [t.model_dump(exclude={"trade_id"}) for t in learner._trades]


@settings(max_examples=examples(100), deadline=None)
@given(
    steps=st.lists(
        st.one_of(
            st.tuples(st.just("trade"), st.floats(-9, 9), st.sampled_from(["bull", None])),
            st.tuples(st.just("read"), st.one_of(st.none(), st.integers(-2, 8))),
        ),
        max_size=30,
    )
)
def test_recent_trades_remembered_equal_those_dumped_again(
    steps: list[tuple[Any, ...]],
) -> None:
    learner = OnlineLearner(None, window=5)
    for i, step in enumerate(steps):
        if step[0] == "trade":
            trade(learner, {"rsi": 0.5, "momentum": step[1] / 10}, step[1], step[2], at_ms=i)
            continue
        last = step[1]
        everything = _dumped_again(learner)
        expected = everything if last is None else everything[-last:] if last > 0 else []
        got = learner.recent_trades(last)
        assert got == expected
        for shown in got:  # the caller's to change: the next answer is untouched
            shown["signals"]["rsi"] = 9.0
            shown["pnl_pct"] = 9.0
        assert learner.recent_trades(last) == expected


def test_recent_trades_of_a_loaded_model_are_the_files(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "learner.json"
    learner = OnlineLearner(path)
    assert learner.recent_trades() == []
    trade(learner, {"rsi": 0.5}, 2.0, "bull", at_ms=7)
    loaded = OnlineLearner(path)
    assert loaded.recent_trades() == learner.recent_trades() == _dumped_again(loaded)
    assert loaded.recent_trades(1)[0]["at_ms"] == 7
