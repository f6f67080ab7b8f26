"""OnlineLearner keeps what it reads of the posteriors in force between learnings: the kept
readings give what a learner reading them for the first time gives."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from property_budget import examples

from learner.online import OnlineLearner

SIGNALS = ("rsi", "momentum", "bollinger", "derivatives")
REGIMES = (None, "", "unknown", "low_volatility", "medium_volatility_trend", "high_volatility")

_TRADE = st.tuples(
    st.dictionaries(
        st.sampled_from(SIGNALS),
        st.one_of(st.just(0.0), st.floats(min_value=-1.0, max_value=1.0)),
        max_size=4,
    ),
    st.floats(min_value=-20.0, max_value=20.0),
    st.sampled_from(REGIMES),
)
_STEP = st.one_of(
    st.tuples(st.just("learn"), _TRADE),
    st.tuples(st.just("read"), st.sampled_from(REGIMES)),
)


def _learn(learner: OnlineLearner, trade: tuple[dict[str, float], float, str | None]) -> None:
    signals, pnl_pct, regime = trade
    learner.update(signals, pnl_pct, regime, "BTC/USDT", 0, 60.0)


def _read(learner: OnlineLearner, regime: str | None, seed: int) -> tuple[Any, ...]:
    return (
        learner.posteriors(regime),
        learner.draw(regime, random.Random(seed)),
        learner.sample_weights(regime, random.Random(seed)),
    )


@settings(max_examples=examples(60), deadline=None)
@given(steps=st.lists(_STEP, max_size=40), min_regime_trades=st.integers(0, 3))
def test_kept_readings_equal_a_fresh_learners(
    steps: list[tuple[str, Any]], min_regime_trades: int
) -> None:
    kept = OnlineLearner(None, min_regime_trades=min_regime_trades)
    learned: list[tuple[dict[str, float], float, str | None]] = []
    for index, (kind, value) in enumerate(steps):
        if kind == "learn":
            _learn(kept, value)
            learned.append(value)
            continue
        fresh = OnlineLearner(None, min_regime_trades=min_regime_trades)
        for trade in learned:
            _learn(fresh, trade)
        assert _read(kept, value, index) == _read(fresh, value, index)


def test_a_caller_changing_its_posteriors_does_not_change_the_next_reading() -> None:
    learner = OnlineLearner(None)
    _learn(learner, ({"rsi": 0.5, "momentum": -0.2}, 3.0, "high_volatility"))
    first = learner.posteriors("high_volatility")
    first["signals"]["rsi"]["alpha"] = -1.0
    first["signals"]["momentum"] = "gone"
    again = learner.posteriors("high_volatility")
    assert again["signals"]["rsi"]["alpha"] > 0
    assert set(again["signals"]) == {"rsi", "momentum"}


def test_a_loaded_model_is_read_afresh(tmp_path: Path) -> None:
    """A learner that read its posteriors and then loads a model reads the model's."""
    path = tmp_path / "learner.json"
    writer = OnlineLearner(path)
    _learn(writer, ({"rsi": 0.5}, 4.0, None))
    reader = OnlineLearner(None)
    assert reader.posteriors(None)["signals"] == {}
    reader._load(path)
    assert reader.posteriors(None) == writer.posteriors(None)
